// The event-driven front end: see include/CEventHTTP.h and docs/front-end.md.
//
// Threads: one loop thread owns every uv handle, the parser and the TLS state of each connection; workers run
// handlers. What workers and other threads hand to the loop (response bytes, "resume reading", "close") goes
// through the connection's lock and the server's dirty list, then `uv_async_send`. Lock order: connection, then
// the server's dirty-list lock; never the reverse.
#define _GNU_SOURCE
#include "CEventHTTP.h"

#include <errno.h>
#include <http_parser.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

enum { ST_IDLE, ST_HEAD, ST_BODY, ST_DISPATCHED, ST_WS, ST_LINGER };
enum { KIND_DATA, KIND_WS_UPGRADE };
enum { STREAM_BUFFER_CAP = 256 << 10, PENDING_CAP = 64 << 10, WS_FRAME_CAP = 64 << 10, LINGER_MS = 2000 };

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
    int sdone, serror, reader_paused;
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

static void conn_flush(eh_conn *c);
static void conn_close(eh_conn *c);
static void close_server_handles(eh_server *s);
static void parse(eh_conn *c, const char *data, size_t n);
static void start_reading(eh_conn *c);

static void logf_(eh_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void logf_(eh_server *s, const char *fmt, ...) {
    if (!s->cfg.on_log) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    s->cfg.on_log(s->cfg.user, buf);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return 0;
    *p = q;
    *cap = n;
    return 1;
}

// MARK: - Connections: references, the peer table

void eh_conn_retain(eh_conn *c) { atomic_fetch_add(&c->refs, 1); }

void eh_conn_release(eh_conn *c) {
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}

int eh_conn_is_closed(eh_conn *c) {
    pthread_mutex_lock(&c->lock);
    int closed = c->closed;
    pthread_mutex_unlock(&c->lock);
    return closed;
}

static unsigned peer_hash(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h % 1024;
}

static int peer_adjust(eh_server *s, const char *addr, int delta) {
    peer **slot = &s->peers[peer_hash(addr)];
    for (peer *p = *slot, **prev = slot; p; prev = &p->next, p = p->next) {
        if (strcmp(p->addr, addr) != 0) continue;
        p->count += delta;
        int count = p->count;
        if (count <= 0) {
            *prev = p->next;
            free(p);
        }
        return count;
    }
    if (delta <= 0) return 0;
    peer *p = calloc(1, sizeof *p);
    if (!p) return 0;
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    p->count = delta;
    p->next = *slot;
    *slot = p;
    return delta;
}

/// Marks `c` for the loop's attention (called with c->lock held) and wakes the loop.
static void mark_dirty(eh_conn *c) {
    if (c->in_dirty) {
        uv_async_send(&c->server->async);
        return;
    }
    c->in_dirty = 1;
    eh_conn_retain(c);
    eh_server *s = c->server;
    pthread_mutex_lock(&s->dlock);
    c->dirty_next = s->dirty;
    s->dirty = c;
    pthread_mutex_unlock(&s->dlock);
    uv_async_send(&s->async);
}

// MARK: - Output

static outbuf *outbuf_new(const void *bytes, size_t len, int flags, int kind) {
    outbuf *o = malloc(sizeof *o + len);
    if (!o) return NULL;
    o->next = NULL;
    o->len = len;
    o->flags = flags;
    o->kind = kind;
    if (len) memcpy(o->data, bytes, len);
    return o;
}

/// Appends `o` to the queue (c->lock held). 0 when closed.
static int enqueue_locked(eh_conn *c, outbuf *o) {
    if (c->closed) {
        free(o);
        return 0;
    }
    if (c->out_tail) c->out_tail->next = o;
    else c->out_head = o;
    c->out_tail = o;
    c->queued += o->len;
    return 1;
}

int eh_conn_respond(eh_conn *c, const void *bytes, size_t length, int flags) {
    outbuf *o = outbuf_new(bytes, length, flags, KIND_DATA);
    if (!o) return 0;
    pthread_mutex_lock(&c->lock);
    if (!enqueue_locked(c, o)) {
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    mark_dirty(c);
    if (flags & EH_WAIT) {
        while (!c->closed && c->queued > c->server->cfg.output_cap) pthread_cond_wait(&c->cond, &c->lock);
    }
    int ok = !c->closed;
    pthread_mutex_unlock(&c->lock);
    return ok;
}

/// From the loop thread: queue and write at once.
static void respond_now(eh_conn *c, const void *bytes, size_t len, int flags) {
    outbuf *o = outbuf_new(bytes, len, flags, KIND_DATA);
    if (!o) return;
    pthread_mutex_lock(&c->lock);
    int ok = enqueue_locked(c, o);
    pthread_mutex_unlock(&c->lock);
    if (ok) conn_flush(c);
}

static void json_escape(char *out, size_t size, const char *s) {
    size_t j = 0;
    for (; *s && j + 7 < size; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            out[j++] = '\\';
            out[j++] = (char)ch;
        } else if (ch < 0x20) {
            j += (size_t)snprintf(out + j, size - j, "\\u%04x", ch);
        } else {
            out[j++] = (char)ch;
        }
    }
    out[j] = 0;
}

static const char *reason_phrase(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 417: return "Expectation Failed";
    case 505: return "HTTP Version Not Supported";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

/// Answers a request the loop refuses with a CloudKit-shaped JSON error, then closes the connection.
static void fail(eh_conn *c, int status, const char *code, const char *reason) {
    if (c->closing || c->state == ST_LINGER) return;
    char escaped[256], body[400], msg[700];
    json_escape(escaped, sizeof escaped, reason);
    int blen = snprintf(body, sizeof body, "{\"serverErrorCode\":\"%s\",\"reason\":\"%s\"}", code, escaped);
    int n = snprintf(msg, sizeof msg,
        "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\n"
        "Connection: close\r\n\r\n%s",
        status, reason_phrase(status), blen, body);
    c->close_after_write = 1;
    c->state = ST_DISPATCHED;  // parse nothing more
    respond_now(c, msg, (size_t)n, EH_CLOSE);
}

static void on_write(uv_write_t *req, int status) {
    write_req *w = (write_req *)req;
    eh_conn *c = w->conn;
    pthread_mutex_lock(&c->lock);
    c->queued -= w->account;
    int drained = c->queued == 0 && c->out_head == NULL;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    free(w->mem);
    free(w);
    if (c->closing) return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    c->write_deadline = drained ? 0 : uv_now(&c->server->loop) + (uint64_t)c->server->cfg.idle_timeout_ms;
    if (drained && c->close_after_write && c->state != ST_LINGER) conn_flush(c);
}

/// Hands `mem` (ownership passes) to libuv; `account` bytes of the queue are settled when it is written.
static void write_raw(eh_conn *c, void *mem, size_t len, size_t account) {
    write_req *w = malloc(sizeof *w);
    if (!w) {
        free(mem);
        conn_close(c);
        return;
    }
    w->conn = c;
    w->account = account;
    w->mem = mem;
    uv_buf_t buf = uv_buf_init(mem, (unsigned)len);
    if (c->write_deadline == 0) c->write_deadline = uv_now(&c->server->loop) + (uint64_t)c->server->cfg.idle_timeout_ms;
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, on_write) != 0) {
        pthread_mutex_lock(&c->lock);
        c->queued -= account;
        pthread_mutex_unlock(&c->lock);
        free(mem);
        free(w);
        conn_close(c);
    }
}

/// Sends whatever TLS produced (handshake records, encrypted data).
static void tls_pump(eh_conn *c, size_t account) {
    size_t pending = BIO_ctrl_pending(c->wbio);
    if (pending == 0) {
        if (account) {
            pthread_mutex_lock(&c->lock);
            c->queued -= account;
            pthread_mutex_unlock(&c->lock);
        }
        return;
    }
    char *mem = malloc(pending);
    if (!mem) {
        conn_close(c);
        return;
    }
    int n = BIO_read(c->wbio, mem, (int)pending);
    write_raw(c, mem, n > 0 ? (size_t)n : 0, account);
}

static void begin_linger(eh_conn *c);
static void request_done(eh_conn *c);
static void switch_to_ws(eh_conn *c);

static void conn_flush(eh_conn *c) {
    if (c->closing) return;
    pthread_mutex_lock(&c->lock);
    outbuf *o = c->out_head;
    c->out_head = c->out_tail = NULL;
    pthread_mutex_unlock(&c->lock);
    while (o && !c->closing) {
        outbuf *next = o->next;
        int flags = o->flags, kind = o->kind;
        if (c->ssl) {
            if (o->len && SSL_write(c->ssl, o->data, (int)o->len) <= 0) {
                free(o);
                conn_close(c);
                break;
            }
            tls_pump(c, o->len);
            free(o);
        } else if (o->len) {
            // The outbuf is the write buffer: data lives after its header.
            size_t len = o->len;
            memmove(o, o->data, len);
            write_raw(c, o, len, len);
        } else {
            free(o);
        }
        if (flags & EH_CLOSE) c->close_after_write = 1;
        if (kind == KIND_WS_UPGRADE && !c->closing) switch_to_ws(c);
        if ((flags & EH_END) && !c->closing) request_done(c);
        o = next;
    }
    while (o) {  // closed meanwhile
        outbuf *next = o->next;
        free(o);
        o = next;
    }
    if (c->closing || !c->close_after_write || c->state == ST_LINGER) return;
    pthread_mutex_lock(&c->lock);
    int drained = c->queued == 0 && c->out_head == NULL;
    pthread_mutex_unlock(&c->lock);
    if (drained) begin_linger(c);
}

// MARK: - Closing

static void on_closed(uv_handle_t *h) {
    eh_conn *c = h->data;
    pthread_mutex_lock(&c->lock);
    free(c->sbuf);
    c->sbuf = NULL;
    c->slen = 0;
    outbuf *o = c->out_head;
    c->out_head = c->out_tail = NULL;
    pthread_mutex_unlock(&c->lock);
    while (o) {
        outbuf *next = o->next;
        free(o);
        o = next;
    }
    if (c->ssl) SSL_free(c->ssl);
    free(c->hbuf);
    free(c->hdrs);
    free(c->body);
    free(c->pend);
    free(c->wsbuf);
    eh_conn_release(c);
}

static void conn_close(eh_conn *c) {
    if (c->closing) return;
    c->closing = 1;
    pthread_mutex_lock(&c->lock);
    c->closed = 1;
    c->serror = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    eh_server *s = c->server;
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->conn_count--;
    peer_adjust(s, c->peer, -1);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
    if (s->stop_phase_seen == 2 && s->conns == NULL) close_server_handles(s);
}

void eh_conn_close(eh_conn *c) {
    pthread_mutex_lock(&c->lock);
    if (!c->closed) {
        c->want_close = 1;
        mark_dirty(c);
    }
    pthread_mutex_unlock(&c->lock);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    (void)status;
    free(req);
}

/// The response is out and the connection is to close: send FIN, then read and drop what the client still sends
/// for a moment, so that unread request bytes do not turn the close into a reset that destroys the response.
static void begin_linger(eh_conn *c) {
    if (c->server->stop_phase_seen == 2) {
        conn_close(c);
        return;
    }
    c->state = ST_LINGER;
    c->deadline = uv_now(&c->server->loop) + LINGER_MS;
    pthread_mutex_lock(&c->lock);
    c->closed = 1;
    c->serror = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (c->ssl) {
        SSL_shutdown(c->ssl);
        tls_pump(c, 0);
    }
    uv_shutdown_t *req = malloc(sizeof *req);
    if (!req || uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        free(req);
        conn_close(c);
        return;
    }
    start_reading(c);
}

// MARK: - Requests

static void reset_request(eh_conn *c) {
    c->hlen = 0;
    c->nhdr = 0;
    c->last_was_value = 0;
    c->target_len = 0;
    c->blen = 0;
    c->oversized = 0;
    c->oversized_len = 0;
    c->streamed = 0;
    c->message_done = 0;
    c->error_status = 0;
    c->error_reason = NULL;
}

static void dispatch(eh_conn *c) {
    eh_server *s = c->server;
    size_t size = sizeof(eh_request) + c->nhdr * sizeof(eh_header) + c->hlen + 1;
    eh_request *r = calloc(1, size);
    if (!r) {
        conn_close(c);
        return;
    }
    eh_header *headers = (eh_header *)(r + 1);
    char *text = (char *)(headers + c->nhdr);
    memcpy(text, c->hbuf, c->hlen);
    text[c->hlen] = 0;
    for (size_t i = 0; i < c->nhdr; i++) {
        headers[i].name = text + c->hdrs[i].name;
        headers[i].name_len = c->hdrs[i].name_len;
        headers[i].value = text + c->hdrs[i].value;
        headers[i].value_len = c->hdrs[i].value_len;
    }
    r->conn = c;
    eh_conn_retain(c);
    r->method = http_method_str((enum http_method)c->parser.method);
    r->target = text;
    r->target_len = c->target_len;
    r->headers = headers;
    r->header_count = c->nhdr;
    r->declared_length = (c->parser.flags & F_CONTENTLENGTH) && !(c->parser.flags & F_CHUNKED)
        ? (int64_t)c->parser.content_length + (int64_t)c->blen
        : -1;
    r->chunked = (c->parser.flags & F_CHUNKED) != 0;
    r->oversized = c->oversized;
    r->oversized_length = c->oversized_len;
    r->streamed = c->streamed;
    r->upgrade = c->parser.upgrade;
    r->keep_alive = c->keep_alive;
    r->tls = c->ssl != NULL;
    snprintf(r->remote, sizeof r->remote, "%s", c->peer);
    if (!c->streamed && !c->oversized) {
        r->body = c->body;
        r->body_len = c->blen;
        r->storage = c->body;
        c->body = NULL;
        c->blen = c->bcap = 0;
    }
    c->state = ST_DISPATCHED;
    c->deadline = c->streamed && !c->message_done ? c->deadline : 0;
    pthread_mutex_lock(&s->qlock);
    if (s->qtail) s->qtail->next = r;
    else s->qhead = r;
    s->qtail = r;
    pthread_cond_signal(&s->qcond);
    pthread_mutex_unlock(&s->qlock);
}

static eh_conn *conn_of(http_parser *p) { return p->data; }

static int append_head(eh_conn *c, const char *at, size_t len) {
    size_t limit = c->server->cfg.max_header_bytes;
    if (c->hlen + len > limit) {
        c->error_status = 431;
        c->error_reason = "the request line and headers are too long";
        return -1;
    }
    if (!grow((void **)&c->hbuf, &c->hcap, c->hlen + len, 1)) return -1;
    memcpy(c->hbuf + c->hlen, at, len);
    c->hlen += len;
    return 0;
}

static int on_message_begin(http_parser *p) {
    eh_conn *c = conn_of(p);
    reset_request(c);
    if (c->state != ST_HEAD) {
        c->state = ST_HEAD;
        c->deadline = uv_now(&c->server->loop) + (uint64_t)c->server->cfg.header_timeout_ms;
    }
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
    eh_conn *c = conn_of(p);
    if (append_head(c, at, len) != 0) return -1;
    c->target_len += len;
    return 0;
}

/// RFC 9110 §5.6.2: a header name is a token.
static int is_token(const char *at, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)at[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) continue;
        if (!strchr("!#$%&'*+-.^_`|~", ch) || ch == 0) return 0;
    }
    return 1;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
    eh_conn *c = conn_of(p);
    if (!is_token(at, len)) {
        c->error_status = 400;
        c->error_reason = "malformed request: a header name that is not a token";
        return -1;
    }
    if (c->nhdr == 0 || c->last_was_value) {
        if (c->nhdr >= c->server->cfg.max_header_count) {
            c->error_status = 431;
            c->error_reason = "the request has too many header lines";
            return -1;
        }
        if (!grow((void **)&c->hdrs, &c->hdrcap, c->nhdr + 1, sizeof(hdr_ref))) return -1;
        c->hdrs[c->nhdr] = (hdr_ref){c->hlen, 0, c->hlen, 0};
        c->nhdr++;
        c->last_was_value = 0;
    }
    if (append_head(c, at, len) != 0) return -1;
    hdr_ref *h = &c->hdrs[c->nhdr - 1];
    h->name_len += len;
    h->value = c->hlen;
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
    eh_conn *c = conn_of(p);
    if (c->nhdr == 0) return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)at[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7F) {
            c->error_status = 400;
            c->error_reason = "malformed request: a control character in a header value";
            return -1;
        }
    }
    if (!c->last_was_value) c->hdrs[c->nhdr - 1].value = c->hlen;
    c->last_was_value = 1;
    if (append_head(c, at, len) != 0) return -1;
    c->hdrs[c->nhdr - 1].value_len += len;
    return 0;
}

static int header_is(eh_conn *c, size_t i, const char *name, const char *value) {
    hdr_ref *h = &c->hdrs[i];
    if (h->name_len != strlen(name) || strncasecmp(c->hbuf + h->name, name, h->name_len) != 0) return 0;
    return value == NULL || (h->value_len == strlen(value) && strncasecmp(c->hbuf + h->value, value, h->value_len) == 0);
}

static int on_headers_complete(http_parser *p) {
    eh_conn *c = conn_of(p);
    eh_server *s = c->server;
    if (p->http_major != 1) {
        c->error_status = 505;
        c->error_reason = "this server speaks HTTP/1.0 and HTTP/1.1";
        return -1;
    }
    c->keep_alive = http_should_keep_alive(p);
    int expect = 0;
    for (size_t i = 0; i < c->nhdr; i++) {
        if (header_is(c, i, "Expect", NULL)) {
            if (!header_is(c, i, "Expect", "100-continue")) {
                c->error_status = 417;
                c->error_reason = "the only Expect this server meets is 100-continue";
                return -1;
            }
            expect = 1;
        }
    }
    const char *prefix = s->streamed_prefix;
    c->streamed = prefix && c->target_len >= strlen(prefix) && strncmp(c->hbuf, prefix, strlen(prefix)) == 0;
    uint64_t now = uv_now(&s->loop);
    int has_length = (p->flags & F_CONTENTLENGTH) != 0;
    if (!c->streamed && has_length && p->content_length > s->cfg.max_body) {
        c->oversized = 1;
        c->oversized_len = (int64_t)p->content_length;
        dispatch(c);
        http_parser_pause(p, 1);
        return 0;
    }
    if (expect) respond_now(c, "HTTP/1.1 100 Continue\r\n\r\n", 25, 0);
    if (c->streamed) {
        c->deadline = now + (uint64_t)s->cfg.body_timeout_ms;
        pthread_mutex_lock(&c->lock);
        c->slen = 0;
        c->sdone = 0;
        c->serror = 0;
        c->reader_paused = 0;
        pthread_mutex_unlock(&c->lock);
        dispatch(c);
        c->deadline = now + (uint64_t)s->cfg.body_timeout_ms;
    } else {
        c->state = ST_BODY;
        c->deadline = now + (uint64_t)s->cfg.body_timeout_ms;
    }
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
    eh_conn *c = conn_of(p);
    eh_server *s = c->server;
    c->deadline = uv_now(&s->loop) + (uint64_t)s->cfg.body_timeout_ms;
    if (c->streamed) {
        pthread_mutex_lock(&c->lock);
        if (grow((void **)&c->sbuf, &c->scap, c->slen + len, 1)) {
            memcpy(c->sbuf + c->slen, at, len);
            c->slen += len;
        } else {
            c->serror = 1;
        }
        pthread_cond_broadcast(&c->cond);
        int full = c->slen > STREAM_BUFFER_CAP;
        if (full) c->reader_paused = 1;
        pthread_mutex_unlock(&c->lock);
        if (full && c->reading) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->reading = 0;
        }
        return 0;
    }
    if (c->blen + len > s->cfg.max_body) {  // a chunked body past the limit
        c->oversized = 1;
        c->oversized_len = (int64_t)(c->blen + len);
        free(c->body);
        c->body = NULL;
        c->blen = c->bcap = 0;
        dispatch(c);
        http_parser_pause(p, 1);
        return 0;
    }
    if (!grow((void **)&c->body, &c->bcap, c->blen + len, 1)) return -1;
    memcpy(c->body + c->blen, at, len);
    c->blen += len;
    return 0;
}

static int on_message_complete(http_parser *p) {
    eh_conn *c = conn_of(p);
    c->message_done = 1;
    if (c->streamed) {
        pthread_mutex_lock(&c->lock);
        c->sdone = 1;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
        c->deadline = 0;
    } else if (c->state != ST_DISPATCHED) {
        dispatch(c);
    }
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void append_pending(eh_conn *c, const char *data, size_t n) {
    if (n == 0) return;
    if (!grow((void **)&c->pend, &c->pcap, c->plen + n, 1)) {
        conn_close(c);
        return;
    }
    memcpy(c->pend + c->plen, data, n);
    c->plen += n;
    if (c->plen > PENDING_CAP && c->reading) {  // a client pipelining far ahead waits
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = 0;
        c->pending_full = 1;
    }
}

static void ws_input(eh_conn *c, const char *data, size_t n);

static void parse(eh_conn *c, const char *data, size_t n) {
    if (c->state == ST_IDLE) {
        c->state = ST_HEAD;
        c->deadline = uv_now(&c->server->loop) + (uint64_t)c->server->cfg.header_timeout_ms;
    }
    size_t used = http_parser_execute(&c->parser, &settings, data, n);
    if (c->closing) return;
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
    if (e == HPE_PAUSED) {
        if (used < n) append_pending(c, data + used, n - used);
    } else if (e != HPE_OK) {
        if (c->error_status) {
            fail(c, c->error_status, "BAD_REQUEST", c->error_reason);
        } else {
            char reason[200];
            snprintf(reason, sizeof reason, "malformed request: %s", http_errno_description(e));
            fail(c, 400, "BAD_REQUEST", reason);
        }
    } else if (used < n) {
        fail(c, 400, "BAD_REQUEST", "malformed request");
    }
}

/// Feeds what arrived while a request was in flight to `consume` (the parser, or the websocket reader once the
/// connection switched), and reads again if the pile had stopped reading.
static void replay_pending(eh_conn *c, void (*consume)(eh_conn *, const char *, size_t)) {
    if (c->pending_full) {
        c->pending_full = 0;
        start_reading(c);
    }
    if (c->plen) {
        uint8_t *data = c->pend;
        size_t n = c->plen;
        c->pend = NULL;
        c->plen = c->pcap = 0;
        consume(c, (const char *)data, n);
        free(data);
    }
}

/// The response to the request in flight has been queued whole: read the next request.
static void request_done(eh_conn *c) {
    eh_server *s = c->server;
    if (c->state != ST_DISPATCHED) return;
    if ((c->streamed && !c->message_done) || c->oversized || !c->keep_alive || c->parser.upgrade || s->stop_phase_seen) {
        c->close_after_write = 1;
    }
    if (c->close_after_write) return;
    reset_request(c);
    c->state = ST_IDLE;
    c->deadline = uv_now(&s->loop) + (uint64_t)s->cfg.idle_timeout_ms;
    http_parser_pause(&c->parser, 0);
    replay_pending(c, parse);
}

long eh_body_read(eh_request *r, void *buffer, size_t length) {
    eh_conn *c = r->conn;
    if (!r->streamed) return 0;
    pthread_mutex_lock(&c->lock);
    while (c->slen == 0 && !c->sdone && !c->serror) pthread_cond_wait(&c->cond, &c->lock);
    long result;
    if (c->slen > 0) {
        size_t n = c->slen < length ? c->slen : length;
        memcpy(buffer, c->sbuf, n);
        memmove(c->sbuf, c->sbuf + n, c->slen - n);
        c->slen -= n;
        result = (long)n;
        if (c->reader_paused && c->slen < STREAM_BUFFER_CAP / 2) {
            c->reader_paused = 0;
            c->want_resume = 1;
            mark_dirty(c);
        }
    } else {
        result = c->sdone ? 0 : -1;
    }
    pthread_mutex_unlock(&c->lock);
    return result;
}

// MARK: - Websockets

static size_t ws_frame_header(uint8_t *h, int opcode, size_t len) {
    h[0] = (uint8_t)(0x80 | opcode);
    if (len < 126) {
        h[1] = (uint8_t)len;
        return 2;
    }
    if (len <= 0xFFFF) {
        h[1] = 126;
        h[2] = (uint8_t)(len >> 8);
        h[3] = (uint8_t)len;
        return 4;
    }
    h[1] = 127;
    for (int i = 0; i < 8; i++) h[2 + i] = (uint8_t)(len >> (56 - 8 * i));
    return 10;
}

static outbuf *ws_frame(int opcode, const void *payload, size_t len, int flags) {
    uint8_t h[10];
    size_t hl = ws_frame_header(h, opcode, len);
    outbuf *o = outbuf_new(NULL, 0, flags, KIND_DATA);
    if (!o) return NULL;
    outbuf *big = realloc(o, sizeof *o + hl + len);
    if (!big) {
        free(o);
        return NULL;
    }
    memcpy(big->data, h, hl);
    if (len) memcpy(big->data + hl, payload, len);
    big->len = hl + len;
    return big;
}

int eh_ws_accept(eh_conn *c, const char *key) {
    char msg[256];
    int n = snprintf(msg, sizeof msg,
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
        key);
    outbuf *o = outbuf_new(msg, (size_t)n, 0, KIND_WS_UPGRADE);
    if (!o) return 0;
    pthread_mutex_lock(&c->lock);
    int ok = enqueue_locked(c, o);
    if (ok) mark_dirty(c);
    pthread_mutex_unlock(&c->lock);
    return ok;
}

int eh_ws_send_text(eh_conn *c, const void *bytes, size_t length) {
    pthread_mutex_lock(&c->lock);
    if (c->closed) {
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    if (c->queued + length > c->server->cfg.output_cap) {  // the client does not read: drop it
        c->want_close = 1;
        mark_dirty(c);
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    outbuf *o = ws_frame(0x1, bytes, length, 0);
    int ok = o && enqueue_locked(c, o);
    if (ok) mark_dirty(c);
    pthread_mutex_unlock(&c->lock);
    return ok;
}

void eh_ws_close(eh_conn *c) {
    uint8_t code[2] = {0x03, 0xE8};  // 1000: normal closure
    outbuf *o = ws_frame(0x8, code, 2, EH_CLOSE);
    if (!o) return;
    pthread_mutex_lock(&c->lock);
    if (enqueue_locked(c, o)) mark_dirty(c);
    pthread_mutex_unlock(&c->lock);
}

static void ws_send_control(eh_conn *c, int opcode, const void *payload, size_t len, int flags) {
    outbuf *o = ws_frame(opcode, payload, len, flags);
    if (!o) return;
    pthread_mutex_lock(&c->lock);
    int ok = enqueue_locked(c, o);
    pthread_mutex_unlock(&c->lock);
    if (ok) conn_flush(c);
}

static void switch_to_ws(eh_conn *c) {
    c->state = ST_WS;
    c->deadline = 0;
    c->last_rx = uv_now(&c->server->loop);
    c->ping_at = 0;
    replay_pending(c, ws_input);
}

static void ws_input(eh_conn *c, const char *data, size_t n) {
    if (!grow((void **)&c->wsbuf, &c->wscap, c->wslen + n, 1)) {
        conn_close(c);
        return;
    }
    memcpy(c->wsbuf + c->wslen, data, n);
    c->wslen += n;
    size_t off = 0;
    while (c->wslen - off >= 2 && c->state == ST_WS) {
        uint8_t *f = c->wsbuf + off;
        size_t avail = c->wslen - off;
        int opcode = f[0] & 0x0F;
        int masked = f[1] & 0x80;
        uint64_t len = f[1] & 0x7F;
        size_t hl = 2;
        if (len == 126) {
            if (avail < 4) break;
            len = ((uint64_t)f[2] << 8) | f[3];
            hl = 4;
        } else if (len == 127) {
            if (avail < 10) break;
            len = 0;
            for (int i = 0; i < 8; i++) len = (len << 8) | f[2 + i];
            hl = 10;
        }
        if (!masked) {
            uint8_t code[2] = {0x03, 0xEA};  // 1002: protocol error (client frames are masked)
            ws_send_control(c, 0x8, code, 2, EH_CLOSE);
            return;
        }
        if (len > WS_FRAME_CAP || ((opcode & 0x8) && len > 125)) {
            uint8_t code[2] = {0x03, 0xF1};  // 1009: message too big
            ws_send_control(c, 0x8, code, 2, EH_CLOSE);
            return;
        }
        if (avail < hl + 4 + len) break;
        uint8_t *mask = f + hl, *payload = f + hl + 4;
        for (uint64_t i = 0; i < len; i++) payload[i] ^= mask[i & 3];
        if (opcode == 0x8) {
            ws_send_control(c, 0x8, payload, len >= 2 ? 2 : 0, EH_CLOSE);
            return;
        } else if (opcode == 0x9) {
            ws_send_control(c, 0xA, payload, (size_t)len, 0);
        } else if (opcode == 0xA) {
            c->ping_at = 0;
        }
        off += hl + 4 + (size_t)len;
    }
    memmove(c->wsbuf, c->wsbuf + off, c->wslen - off);
    c->wslen -= off;
}

// MARK: - Reading

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    eh_conn *c = h->data;
    *buf = uv_buf_init(c->server->readbuf, sizeof c->server->readbuf);
}

static void plain_input(eh_conn *c, const char *data, size_t n) {
    c->last_rx = uv_now(&c->server->loop);
    switch (c->state) {
    case ST_LINGER: return;
    case ST_WS: ws_input(c, data, n); return;
    case ST_DISPATCHED:
        if (c->streamed && !c->message_done) parse(c, data, n);
        else append_pending(c, data, n);
        return;
    default: parse(c, data, n);
    }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    eh_conn *c = stream->data;
    if (nread == 0 || c->closing) return;
    if (nread < 0) {
        if (c->state == ST_DISPATCHED && c->message_done && nread == UV_EOF) {
            // The client sent its request and half-closed: answer, then close. A long poll or pusher sees it
            // closed (the client cannot read a later answer on most clients anyway).
            uv_read_stop(stream);
            c->reading = 0;
            c->close_after_write = 1;
            pthread_mutex_lock(&c->lock);
            c->serror = 1;
            pthread_cond_broadcast(&c->cond);
            pthread_mutex_unlock(&c->lock);
            return;
        }
        conn_close(c);
        return;
    }
    if (!c->ssl) {
        plain_input(c, buf->base, (size_t)nread);
        return;
    }
    BIO_write(c->rbio, buf->base, (int)nread);
    if (!c->handshake_done) {
        int r = SSL_do_handshake(c->ssl);
        tls_pump(c, 0);
        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                unsigned long code = ERR_get_error();
                char reason[256];
                ERR_error_string_n(code, reason, sizeof reason);
                logf_(c->server, "TLS handshake with %s failed: %s", c->peer, code ? reason : "connection reset");
                ERR_clear_error();
                conn_close(c);
            }
            return;
        }
        c->handshake_done = 1;
        c->state = ST_IDLE;
        c->deadline = uv_now(&c->server->loop) + (uint64_t)c->server->cfg.header_timeout_ms;
    }
    char plain[16 << 10];
    for (;;) {
        int r = SSL_read(c->ssl, plain, sizeof plain);
        if (r > 0) {
            plain_input(c, plain, (size_t)r);
            if (c->closing) return;
            continue;
        }
        int e = SSL_get_error(c->ssl, r);
        tls_pump(c, 0);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return;
        ERR_clear_error();
        conn_close(c);  // the client closed (close_notify) or sent garbage
        return;
    }
}

static void start_reading(eh_conn *c) {
    if (c->reading || c->closing) return;
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) c->reading = 1;
}

// MARK: - Accepting, timeouts, cross-thread work

static void on_connection(uv_stream_t *listener, int status) {
    eh_server *s = listener->data;
    if (status < 0) {
        logf_(s, "accept failed: %s", uv_strerror(status));
        return;
    }
    eh_conn *c = calloc(1, sizeof *c);
    if (!c) return;
    atomic_init(&c->refs, 1);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->server = s;
    uv_tcp_init(&s->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        c->closing = 1;
        uv_close((uv_handle_t *)&c->tcp, on_closed);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage addr;
    int len = sizeof addr;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&addr, &len) == 0) {
        if (addr.ss_family == AF_INET6) uv_ip6_name((struct sockaddr_in6 *)&addr, c->peer, sizeof c->peer);
        else uv_ip4_name((struct sockaddr_in *)&addr, c->peer, sizeof c->peer);
    }
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->conn_count++;
    int count = peer_adjust(s, c->peer, 1);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    uint64_t now = uv_now(&s->loop);
    if (s->cfg.tls_context) {
        c->ssl = SSL_new((SSL_CTX *)s->cfg.tls_context);
        c->rbio = BIO_new(BIO_s_mem());
        c->wbio = BIO_new(BIO_s_mem());
        SSL_set_bio(c->ssl, c->rbio, c->wbio);
        SSL_set_accept_state(c->ssl);
        c->state = ST_HEAD;  // the handshake is bounded like a request's headers
        c->deadline = now + (uint64_t)s->cfg.header_timeout_ms;
    } else {
        c->state = ST_IDLE;
        c->deadline = now + (uint64_t)s->cfg.header_timeout_ms;
    }
    if (s->cfg.max_connections_per_peer > 0 && count > s->cfg.max_connections_per_peer) {
        if (c->ssl) conn_close(c);
        else fail(c, 503, "SERVICE_UNAVAILABLE", "too many connections from this address");
        return;
    }
    start_reading(c);
}

static void on_sweep(uv_timer_t *t) {
    eh_server *s = t->data;
    uint64_t now = uv_now(&s->loop);
    uint64_t ping_ms = (uint64_t)(s->cfg.idle_timeout_ms > 30000 ? s->cfg.idle_timeout_ms : 30000);
    for (eh_conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->write_deadline && now > c->write_deadline) {  // the client stopped reading
            conn_close(c);
            continue;
        }
        if (c->state == ST_WS) {
            if (c->ping_at && now - c->ping_at > ping_ms) conn_close(c);
            else if (!c->ping_at && now - c->last_rx > ping_ms) {
                c->ping_at = now;
                ws_send_control(c, 0x9, NULL, 0, 0);
            }
            continue;
        }
        if (!c->deadline || now <= c->deadline) continue;
        switch (c->state) {
        case ST_HEAD:
            if (c->ssl && !c->handshake_done) conn_close(c);
            else fail(c, 408, "REQUEST_TIMEOUT", "the request headers did not arrive in time");
            break;
        case ST_BODY: fail(c, 408, "REQUEST_TIMEOUT", "the request body did not arrive in time"); break;
        case ST_DISPATCHED:  // a streamed body stalled: its reader fails, the handler answers and closes
            if (c->streamed && !c->message_done && c->reading) {
                pthread_mutex_lock(&c->lock);
                c->serror = 1;
                pthread_cond_broadcast(&c->cond);
                pthread_mutex_unlock(&c->lock);
                c->deadline = 0;
            }
            break;
        default: conn_close(c); break;
        }
    }
}

static void close_server_handles(eh_server *s) {
    if (s->closing_handles) return;
    s->closing_handles = 1;
    uv_close((uv_handle_t *)&s->sweep, NULL);
    uv_close((uv_handle_t *)&s->async, NULL);
}

static void on_async(uv_async_t *a) {
    eh_server *s = a->data;
    pthread_mutex_lock(&s->dlock);
    eh_conn *list = s->dirty;
    s->dirty = NULL;
    int phase = s->stop_phase;
    pthread_mutex_unlock(&s->dlock);
    while (list) {
        eh_conn *c = list;
        list = c->dirty_next;
        pthread_mutex_lock(&c->lock);
        c->in_dirty = 0;
        int resume = c->want_resume, close = c->want_close;
        c->want_resume = c->want_close = 0;
        pthread_mutex_unlock(&c->lock);
        if (!c->closing) {
            conn_flush(c);
            if (resume && !c->closing && c->state == ST_DISPATCHED) start_reading(c);
            if (close) conn_close(c);
        }
        eh_conn_release(c);
    }
    if (phase >= 1 && s->stop_phase_seen < 1) {
        s->stop_phase_seen = 1;
        uv_close((uv_handle_t *)&s->listener, NULL);
        for (eh_conn *c = s->conns, *next; c; c = next) {  // nothing in flight: close
            next = c->next;
            if (c->state != ST_DISPATCHED) conn_close(c);
        }
    }
    if (phase >= 2 && s->stop_phase_seen < 2) {
        s->stop_phase_seen = 2;
        uint64_t now = uv_now(&s->loop);
        for (eh_conn *c = s->conns, *next; c; c = next) {  // answers being written get a moment to go out
            next = c->next;
            pthread_mutex_lock(&c->lock);
            int drained = c->queued == 0 && c->out_head == NULL;
            pthread_mutex_unlock(&c->lock);
            if (drained) {
                conn_close(c);
            } else {
                c->close_after_write = 1;
                c->write_deadline = now + 1000;
            }
        }
    }
    if (s->stop_phase_seen == 2 && s->conns == NULL) close_server_handles(s);
}

static void *loop_main(void *arg) {
    eh_server *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void *worker_main(void *arg) {
    eh_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->qlock);
        while (!s->qhead && !s->quit) pthread_cond_wait(&s->qcond, &s->qlock);
        eh_request *r = s->qhead;
        if (!r) {
            pthread_mutex_unlock(&s->qlock);
            return NULL;
        }
        s->qhead = r->next;
        if (!s->qhead) s->qtail = NULL;
        s->busy++;
        pthread_mutex_unlock(&s->qlock);
        s->cfg.on_request(s->cfg.user, r);
        eh_conn *c = r->conn;
        free(r->storage);
        free(r);
        eh_conn_release(c);
        pthread_mutex_lock(&s->qlock);
        s->busy--;
        if (!s->qhead && s->busy == 0) pthread_cond_broadcast(&s->idle);
        pthread_mutex_unlock(&s->qlock);
    }
}

int eh_server_start(const eh_config *cfg, eh_server **out, char *error, size_t error_size) {
    eh_server *s = calloc(1, sizeof *s);
    if (!s) return -1;
    s->cfg = *cfg;
    if (cfg->streamed_prefix) s->streamed_prefix = strdup(cfg->streamed_prefix);
    pthread_mutex_init(&s->dlock, NULL);
    pthread_mutex_init(&s->qlock, NULL);
    pthread_cond_init(&s->qcond, NULL);
    pthread_cond_init(&s->idle, NULL);
    uv_loop_init(&s->loop);
    uv_tcp_init(&s->loop, &s->listener);
    s->listener.data = s;
    struct sockaddr_storage addr;
    int r = strchr(cfg->host, ':') ? uv_ip6_addr(cfg->host, cfg->port, (struct sockaddr_in6 *)&addr)
                                   : uv_ip4_addr(cfg->host, cfg->port, (struct sockaddr_in *)&addr);
    if (r == 0) r = uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0);
    if (r == 0) r = uv_listen((uv_stream_t *)&s->listener, 1024, on_connection);
    if (r != 0) {
        snprintf(error, error_size, "%s", uv_strerror(r));
        uv_close((uv_handle_t *)&s->listener, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        free(s->streamed_prefix);
        free(s);
        return -1;
    }
    int len = sizeof addr;
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&addr, &len);
    s->port = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
                                                : ((struct sockaddr_in *)&addr)->sin_port);
    uv_async_init(&s->loop, &s->async, on_async);
    s->async.data = s;
    uv_timer_init(&s->loop, &s->sweep);
    s->sweep.data = s;
    uv_timer_start(&s->sweep, on_sweep, 100, 100);
    s->worker_count = cfg->workers > 0 ? cfg->workers : 1;
    s->workers = calloc((size_t)s->worker_count, sizeof(pthread_t));
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (cfg->worker_stack) pthread_attr_setstacksize(&attr, cfg->worker_stack);
    for (int i = 0; i < s->worker_count; i++) pthread_create(&s->workers[i], &attr, worker_main, s);
    pthread_attr_destroy(&attr);
    pthread_create(&s->loop_thread, NULL, loop_main, s);
    *out = s;
    return 0;
}

int eh_server_port(const eh_server *s) { return s->port; }

static void set_phase(eh_server *s, int phase) {
    pthread_mutex_lock(&s->dlock);
    s->stop_phase = phase;
    pthread_mutex_unlock(&s->dlock);
    uv_async_send(&s->async);
}

void eh_server_stop(eh_server *s) {
    set_phase(s, 1);  // stop accepting, close connections with nothing in flight
    pthread_mutex_lock(&s->qlock);
    while (s->qhead || s->busy) pthread_cond_wait(&s->idle, &s->qlock);
    s->quit = 1;
    pthread_cond_broadcast(&s->qcond);
    pthread_mutex_unlock(&s->qlock);
    for (int i = 0; i < s->worker_count; i++) pthread_join(s->workers[i], NULL);
    set_phase(s, 2);  // close the rest (long polls, websockets)
    pthread_join(s->loop_thread, NULL);
    uv_loop_close(&s->loop);
    for (int i = 0; i < 1024; i++) {
        for (peer *p = s->peers[i], *next; p; p = next) {
            next = p->next;
            free(p);
        }
    }
    pthread_mutex_destroy(&s->dlock);
    pthread_mutex_destroy(&s->qlock);
    pthread_cond_destroy(&s->qcond);
    pthread_cond_destroy(&s->idle);
    free(s->workers);
    free(s->streamed_prefix);
    free(s);
}

size_t eh_current_thread_stack_size(void) {
    pthread_attr_t attr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstacksize(&attr, &size);
        pthread_attr_destroy(&attr);
    }
    return size;
}

int eh_tls_configure(void *ssl_ctx, const char *ciphers) {
    SSL_CTX *ctx = ssl_ctx;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) return 0;
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    return SSL_CTX_set_cipher_list(ctx, ciphers) == 1;
}
