// The event-driven front end's internals, shared by its files: see include/CEventHTTP.h and docs/front-end.md.
//
// Threads: one loop thread owns every uv handle, the parser and the TLS state of each connection; workers run
// handlers. What workers and other threads hand to the loop (response bytes, "resume reading", "close") goes
// through the connection's lock and the server's dirty list, then `uv_async_send`. Lock order: connection, then
// the server's dirty-list lock; never the reverse.
#ifndef EVENTHTTP_INTERNAL_H
#define EVENTHTTP_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "CEventHTTP.h"

#include <stdarg.h>

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <http_parser.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

enum { ST_IDLE, ST_HEAD, ST_BODY, ST_DISPATCHED, ST_WS, ST_LINGER };
enum { KIND_DATA, KIND_WS_UPGRADE, KIND_FILE };
enum { FILE_CHUNK = 512 << 10, STREAM_BUFFER_CAP = 256 << 10, PENDING_CAP = 64 << 10, WS_FRAME_CAP = 64 << 10, LINGER_MS = 2000 };
/// How far the loop reads a streamed body ahead of its handler before it stops reading: the handler is woken at
/// STREAM_BUFFER_CAP, and while it hashes and writes that piece the loop goes on to this much rather than stop, so
/// that a handler slower than the socket does not cost a stop and a restart of reading for every piece.
enum { STREAM_READ_AHEAD = 2 * STREAM_BUFFER_CAP };

typedef struct outbuf {
    struct outbuf *next;
    size_t len;
    int flags;
    int kind;
    char data[];
} outbuf;

typedef struct {
    size_t name, name_len, value, value_len;
} hdr_ref;

/// What a KIND_FILE outbuf carries (in its data; its len is 0): a range of an open file, sent by the loop.
typedef struct {
    int fd;
    int64_t offset, length;
} file_spec;

/// A file body being sent (eh_conn_send_file): the loop reads FILE_CHUNK at a time on libuv's thread pool and
/// writes each chunk as it arrives, reading the next while the previous is being written (at most `output_cap`
/// queued, plus the chunk being read). Loop thread only.
typedef struct file_body {
    uv_fs_t req;
    int fd;
    int64_t offset, end;
    int flags;      // the response's EH_END / EH_CLOSE, applied once the last chunk is queued
    int reading;    // a read is in flight (it holds a reference on the connection)
    char *buf;      // the chunk being read
    outbuf *rest;   // anything queued after the body, written once it is out
} file_body;

typedef struct peer {
    struct peer *next;
    int count;
    char addr[64];
} peer;

struct eh_server {
    eh_config cfg;
    char *streamed_prefix;
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t async;
    uv_timer_t sweep;
    pthread_t loop_thread;
    int port;
    int closing_handles;
    // Loop thread only.
    eh_conn *conns;
    size_t conn_count;
    /// Where the next sweep tick goes on in `conns` (NULL: from the head); moved on when that connection unlinks.
    eh_conn *sweep_next;
    int stop_phase_seen;
    peer *peers[1024];
    char readbuf[64 << 10];
    // Cross-thread (dlock).
    pthread_mutex_t dlock;
    eh_conn *dirty;
    int stop_phase;
    // Worker pool (qlock).
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    pthread_cond_t idle;
    eh_request *qhead, *qtail;
    int busy;
    int quit;
    pthread_t *workers;
    int worker_count;
};

struct eh_conn {
    uv_tcp_t tcp;
    eh_server *server;
    atomic_int refs;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    // Under lock.
    int closed;
    outbuf *out_head, *out_tail;
    size_t queued;
    int in_dirty;
    eh_conn *dirty_next;
    int want_resume, want_close;
    uint8_t *sbuf;
    size_t slen, scap;
    /// How many buffered body bytes the handler waits for (eh_body_read); the loop wakes it at that many.
    size_t swant;
    int sdone, serror, reader_paused;
    /// The loop is reading the socket straight into `sbuf` after its `slen` bytes (ehi_body_direct): until the read
    /// is parsed, the handler neither takes nor moves the buffer.
    int filling;
    /// The client has gone (closed, or half-closed while its answer was awaited), and who to tell once.
    int gone;
    eh_gone_fn gone_fn;
    void *gone_context;
    // Loop thread only.
    eh_conn *prev, *next;
    int closing;
    int state;
    uint64_t deadline;
    uint64_t write_deadline;
    int reading;
    int pending_full;
    http_parser parser;
    char *hbuf;
    size_t hlen, hcap;
    hdr_ref *hdrs;
    size_t nhdr, hdrcap;
    int last_was_value;
    size_t target_len;
    uint8_t *body;
    size_t blen, bcap;
    int oversized;
    int64_t oversized_len;
    int streamed;
    int message_done;
    int keep_alive;
    int close_after_write;
    file_body *file;
    int error_status;
    const char *error_reason;
    uint8_t *pend;
    size_t plen, pcap;
    SSL *ssl;
    BIO *rbio, *wbio;
    int handshake_done;
    uint8_t *wsbuf;
    size_t wslen, wscap;
    uint64_t last_rx;
    uint64_t ping_at;
    char peer[64];
};

typedef struct {
    uv_write_t req;
    eh_conn *conn;
    size_t account;
    void *mem;
} write_req;



// Functions one file of the front end calls in another (hidden: not part of the library's API).
#define EHI __attribute__((visibility("hidden")))
EHI void ehi_append_pending(eh_conn *c, const char *data, size_t n);
EHI int ehi_body_direct(eh_conn *c, uv_buf_t *buf);
EHI void ehi_body_direct_done(eh_conn *c);
EHI void ehi_close_server_handles(eh_server *s);
EHI void ehi_conn_close(eh_conn *c);
EHI void ehi_conn_flush(eh_conn *c);
EHI int ehi_enqueue_locked(eh_conn *c, outbuf *o);
EHI void ehi_file_free(eh_conn *c);
EHI void ehi_fail(eh_conn *c, int status, const char *code, const char *reason);
EHI void ehi_conn_gone(eh_conn *c);
EHI void ehi_mark_dirty(eh_conn *c);
EHI void ehi_on_closed(uv_handle_t *h);
EHI outbuf *ehi_outbuf_new(const void *bytes, size_t len, int flags, int kind);
EHI void ehi_parse(eh_conn *c, const char *data, size_t n);
EHI int ehi_peer_adjust(eh_server *s, const char *addr, int delta);
EHI void ehi_replay_pending(eh_conn *c, void (*consume)(eh_conn *, const char *, size_t));
EHI void ehi_request_done(eh_conn *c);
EHI void ehi_respond_now(eh_conn *c, const void *bytes, size_t len, int flags);
EHI void ehi_start_reading(eh_conn *c);
EHI void ehi_switch_to_ws(eh_conn *c);
EHI void ehi_tls_pump(eh_conn *c, size_t account);
EHI void ehi_ws_input(eh_conn *c, const char *data, size_t n);
EHI void ehi_ws_send_control(eh_conn *c, int opcode, const void *payload, size_t len, int flags);

static inline void logf_(eh_server *s, const char *fmt, ...) {
    if (!s->cfg.on_log) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    s->cfg.on_log(s->cfg.user, buf);
}

static inline int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return 0;
    *p = q;
    *cap = n;
    return 1;
}

#endif
