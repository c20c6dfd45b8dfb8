// An event-driven HTTP/1.1 front end for Cloudlet's server, over libuv (event loop, sockets, timers),
// http-parser (request framing) and OpenSSL (TLS through memory BIOs). See docs/front-end.md.
//
// One loop thread owns every socket: accepting, parsing, timeouts, TLS and writing. Complete requests are handed
// to a bounded pool of worker threads, which call `eh_config.on_request`; the handler answers with
// `eh_conn_respond` from any thread (later, too: a long poll or a websocket holds no thread). Idle keep-alive
// connections, waiting long polls and websockets cost memory only.
#ifndef CEVENTHTTP_H
#define CEVENTHTTP_H

#include <stddef.h>
#include <stdint.h>

typedef struct eh_server eh_server;
typedef struct eh_conn eh_conn;

typedef struct {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} eh_header;

/// A request as the loop read it. Valid during `on_request` only (copy what outlives it; retain `conn`).
typedef struct eh_request {
    eh_conn *conn;
    const char *method;
    /// The request target as sent (`/path?query`), not decoded.
    const char *target;
    size_t target_len;
    const eh_header *headers;
    size_t header_count;
    /// The body read so far: the whole body unless `streamed` or `oversized`.
    const uint8_t *body;
    size_t body_len;
    /// `Content-Length`, or -1 (chunked or none).
    int64_t declared_length;
    int chunked;
    /// The body is over `max_body` and was not kept; the connection closes after the response.
    int oversized;
    int64_t oversized_length;
    /// The body is read by the handler with `eh_body_read`.
    int streamed;
    /// A websocket handshake (`Upgrade: websocket`): answer with `eh_ws_accept` or an ordinary response.
    int upgrade;
    int keep_alive;
    int tls;
    char remote[64];
    struct eh_request *next;
    void *storage;
} eh_request;

typedef void (*eh_request_fn)(void *user, eh_request *request);
typedef void (*eh_log_fn)(void *user, const char *message);

typedef struct {
    const char *host;
    int port;
    /// Worker threads that run `on_request`, and their stack size in bytes.
    int workers;
    size_t worker_stack;
    /// Larger bodies are not kept (`oversized`).
    size_t max_body;
    /// Requests whose path starts with this have their bodies read by the handler (`streamed`); NULL for none.
    const char *streamed_prefix;
    /// Milliseconds: from a request's first byte (or the TLS handshake's) to the end of its headers; between two
    /// pieces of a body; a keep-alive connection waiting for its next request (and a stalled write, and the
    /// interval of websocket pings).
    int header_timeout_ms;
    int body_timeout_ms;
    int idle_timeout_ms;
    /// Open connections from one peer address (more are answered 503 and closed); 0 for no cap.
    int max_connections_per_peer;
    /// Header lines in a request, and bytes of its request line plus headers (more: 431).
    size_t max_header_count;
    size_t max_header_bytes;
    /// Bytes queued for one connection before a streamed writer waits and a websocket send fails.
    size_t output_cap;
    /// Connections the 100 ms timeout sweep looks at per tick, round robin (0: 1,024): a server holding 10,000 idle
    /// websockets then spends a bounded moment per tick, and each connection's timeouts are checked every
    /// ceil(N / budget) ticks.
    int sweep_budget;
    /// An `SSL_CTX *` for HTTPS, or NULL.
    void *tls_context;
    eh_request_fn on_request;
    eh_log_fn on_log;
    void *user;
} eh_config;

/// Binds, starts the loop and the workers. 0 on success; otherwise fills `error`.
int eh_server_start(const eh_config *config, eh_server **server, char *error, size_t error_size);
int eh_server_port(const eh_server *server);
/// Stops accepting, lets the workers finish the requests they run (their responses are written), closes every
/// connection, and frees the server. Must not be called from a worker or the loop.
void eh_server_stop(eh_server *server);

void eh_conn_retain(eh_conn *conn);
void eh_conn_release(eh_conn *conn);
/// Whether the connection is closed (or closing): nothing more will be sent.
int eh_conn_is_closed(eh_conn *conn);
/// Closes the connection from any thread.
void eh_conn_close(eh_conn *conn);

typedef void (*eh_gone_fn)(void *context);
/// Watches for the client to go: `gone(context)` is called once, on the loop thread, when the connection closes
/// or its client half-closes while its answer is still being waited for (a long poll, a websocket pusher). `gone`
/// must not block. One watch per connection (a second replaces nothing: returns 0). Returns 1 when watching; 0 when
/// the client is already gone or a watch exists — then `gone` is never called for this `context`.
int eh_conn_watch(eh_conn *conn, eh_gone_fn gone, void *context);
/// Ends the watch: returns its context if `gone` was not (and now will never be) called for it, else NULL.
void *eh_conn_unwatch(eh_conn *conn);

enum {
    /// The last bytes of the response: the connection reads its next request afterwards.
    EH_END = 1,
    /// Close the connection once the bytes are sent.
    EH_CLOSE = 2,
    /// Wait while more than `output_cap` bytes are queued (a streamed body): backpressure on a slow reader.
    EH_WAIT = 4,
};
/// Queues response bytes (status, headers, body in one call where possible). 1 when queued, 0 when the connection
/// is closed. Thread-safe.
int eh_conn_respond(eh_conn *conn, const void *bytes, size_t length, int flags);
/// Queues `length` bytes of the open file `fd` from `offset` as (the rest of) a response body, after whatever was
/// queued before; `flags` as for `eh_conn_respond` (EH_WAIT is ignored: nothing waits). The loop reads the file on
/// libuv's thread pool and writes it (through TLS where the connection has it), at most `output_cap` bytes queued,
/// so the calling worker is free at once and a slow client holds memory, not a thread. Takes ownership of `fd`
/// (closed when the body is out, the connection closes, or at once when this fails). A file shorter than
/// `length` closes the connection (its `Content-Length` cannot be kept). 1 when queued, 0 when the connection is
/// closed. Thread-safe.
int eh_conn_send_file(eh_conn *conn, int fd, int64_t offset, int64_t length, int flags);

/// Reads the body of a `streamed` request into `buffer`: bytes read, 0 at its end, -1 when the client stopped
/// sending (body timeout) or went away. Blocks until it can fill `buffer` (or 256 KiB of it, what the loop holds
/// before it stops reading), or the body ends; worker threads only, during `on_request`.
long eh_body_read(eh_request *request, void *buffer, size_t length);

/// Like `eh_body_read`, without the copy: waits for `want` bytes (at most 256 KiB) or the end of the body, then
/// exchanges the loop's buffer, which holds them, with `*buffer` (`malloc`'d, `*capacity` bytes; NULL and 0 the
/// first time): `*buffer` then holds the bytes (all the loop had, possibly more than `want`) and the loop goes on
/// filling the handler's old buffer. Returns how many bytes `*buffer` holds, 0 at the end of the body, -1 as
/// `eh_body_read`. The caller frees `*buffer` (`free`) when done. Worker threads only, during `on_request`.
long eh_body_take(eh_request *request, void **buffer, size_t *capacity, size_t want);

/// Answers a websocket handshake with 101 (`accept_key` is the Sec-WebSocket-Accept value) and switches the
/// connection to websocket frames. 1 on success.
int eh_ws_accept(eh_conn *conn, const char *accept_key);
/// Queues one text message without blocking. 0 when the connection is closed, or when the client's unread
/// backlog would pass `output_cap` (then the connection is closed). Thread-safe.
int eh_ws_send_text(eh_conn *conn, const void *bytes, size_t length);

/// Sends a close frame (1000) and closes the connection once it is out. Thread-safe.
void eh_ws_close(eh_conn *conn);

/// Sets an `SSL_CTX` for serving: TLS 1.2 at least, the server's cipher preference, no renegotiation, and the
/// TLS 1.2 `ciphers` (TLS 1.3's suites are all forward-secret AEAD). 1 on success.
int eh_tls_configure(void *ssl_ctx, const char *ciphers);

/// The stack size of the calling thread.
size_t eh_current_thread_stack_size(void);

#endif
