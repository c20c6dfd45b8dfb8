// The front end: connections (references, the per-peer table, the dirty list), reading, accepting, timeouts,
// the loop and the worker pool, start and stop.
#include "eventhttp_internal.h"

static unsigned peer_hash(const char *s);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void plain_input(eh_conn *c, const char *data, size_t n);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void handle_read(eh_conn *c, ssize_t nread, const uv_buf_t *buf);
static void on_connection(uv_stream_t *listener, int status);
static void on_sweep(uv_timer_t *t);
static void on_async(uv_async_t *a);
static void *loop_main(void *arg);
static void *worker_main(void *arg);
static void set_phase(eh_server *s, int phase);

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

int eh_conn_watch(eh_conn *c, eh_gone_fn gone, void *context) {
    pthread_mutex_lock(&c->lock);
    int ok = !c->gone && !c->closed && c->gone_fn == NULL;
    if (ok) {
        c->gone_fn = gone;
        c->gone_context = context;
    }
    pthread_mutex_unlock(&c->lock);
    return ok;
}

void *eh_conn_unwatch(eh_conn *c) {
    pthread_mutex_lock(&c->lock);
    void *context = c->gone_context;
    c->gone_fn = NULL;
    c->gone_context = NULL;
    pthread_mutex_unlock(&c->lock);
    return context;
}

/// The client has gone: tells the watcher once (loop thread; outside the lock, so `gone` may call back in).
void ehi_conn_gone(eh_conn *c) {
    pthread_mutex_lock(&c->lock);
    c->gone = 1;
    eh_gone_fn gone = c->gone_fn;
    void *context = c->gone_context;
    c->gone_fn = NULL;
    c->gone_context = NULL;
    pthread_mutex_unlock(&c->lock);
    if (gone) gone(context);
}

static unsigned peer_hash(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h % 1024;
}

int ehi_peer_adjust(eh_server *s, const char *addr, int delta) {
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
void ehi_mark_dirty(eh_conn *c) {
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

// MARK: - Reading

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    eh_conn *c = h->data;
    if (ehi_body_direct(c, buf)) return;  // a streamed body: into the handler's buffer, no copy
    *buf = uv_buf_init(c->server->readbuf, sizeof c->server->readbuf);
}

static void plain_input(eh_conn *c, const char *data, size_t n) {
    c->last_rx = uv_now(&c->server->loop);
    switch (c->state) {
    case ST_LINGER: return;
    case ST_WS: ehi_ws_input(c, data, n); return;
    case ST_DISPATCHED:
        if (c->streamed && !c->message_done) ehi_parse(c, data, n);
        else ehi_append_pending(c, data, n);
        return;
    default: ehi_parse(c, data, n);
    }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    eh_conn *c = stream->data;
    handle_read(c, nread, buf);
    if (c->filling) ehi_body_direct_done(c);  // libuv calls this after every on_alloc, even for nothing read
}

static void handle_read(eh_conn *c, ssize_t nread, const uv_buf_t *buf) {
    if (nread == 0 || c->closing) return;
    if (nread < 0) {
        if (c->state == ST_DISPATCHED && c->message_done && nread == UV_EOF) {
            // The client sent its request and half-closed: answer, then close. A long poll or pusher sees it
            // closed (the client cannot read a later answer on most clients anyway).
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->reading = 0;
            c->close_after_write = 1;
            pthread_mutex_lock(&c->lock);
            c->serror = 1;
            pthread_cond_broadcast(&c->cond);
            pthread_mutex_unlock(&c->lock);
            ehi_conn_gone(c);  // a long poll stops waiting and answers at once
            return;
        }
        ehi_conn_close(c);
        return;
    }
    if (!c->ssl) {
        plain_input(c, buf->base, (size_t)nread);
        return;
    }
    BIO_write(c->rbio, buf->base, (int)nread);
    if (!c->handshake_done) {
        int r = SSL_do_handshake(c->ssl);
        ehi_tls_pump(c, 0);
        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                unsigned long code = ERR_get_error();
                char reason[256];
                ERR_error_string_n(code, reason, sizeof reason);
                logf_(c->server, "TLS handshake with %s failed: %s", c->peer, code ? reason : "connection reset");
                ERR_clear_error();
                ehi_conn_close(c);
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
        ehi_tls_pump(c, 0);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return;
        ERR_clear_error();
        ehi_conn_close(c);  // the client closed (close_notify) or sent garbage
        return;
    }
}

void ehi_start_reading(eh_conn *c) {
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
        uv_close((uv_handle_t *)&c->tcp, ehi_on_closed);
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
    int count = ehi_peer_adjust(s, c->peer, 1);
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
        if (c->ssl) ehi_conn_close(c);
        else ehi_fail(c, 503, "SERVICE_UNAVAILABLE", "too many connections from this address");
        return;
    }
    ehi_start_reading(c);
}

// Every 100 ms: timeouts, stalled writers, websocket pings — for at most `sweep_budget` connections, going on round
// robin from where the last tick stopped. Walking all of them each tick stalled the loop for ~1.7 ms every 100 ms
// with 10,000 idle websockets open (a lookup's p99 2.4-3.4x its idle value, issue 19's goal is 2x).
static void on_sweep(uv_timer_t *t) {
    eh_server *s = t->data;
    uint64_t now = uv_now(&s->loop);
    uint64_t ping_ms = (uint64_t)(s->cfg.idle_timeout_ms > 30000 ? s->cfg.idle_timeout_ms : 30000);
    int budget = s->cfg.sweep_budget > 0 ? s->cfg.sweep_budget : 1024;
    eh_conn *c = s->sweep_next ? s->sweep_next : s->conns;
    for (eh_conn *next; c && budget > 0; c = next, budget--) {
        next = c->next;
        s->sweep_next = next;  // before c may close (its unlink then leaves the cursor alone)
        if (c->write_deadline && now > c->write_deadline) {  // the client stopped reading
            ehi_conn_close(c);
            continue;
        }
        if (c->state == ST_WS) {
            if (c->ping_at && now - c->ping_at > ping_ms) ehi_conn_close(c);
            else if (!c->ping_at && now - c->last_rx > ping_ms) {
                c->ping_at = now;
                ehi_ws_send_control(c, 0x9, NULL, 0, 0);
            }
            continue;
        }
        if (!c->deadline || now <= c->deadline) continue;
        switch (c->state) {
        case ST_HEAD:
            if (c->ssl && !c->handshake_done) ehi_conn_close(c);
            else ehi_fail(c, 408, "REQUEST_TIMEOUT", "the request headers did not arrive in time");
            break;
        case ST_BODY: ehi_fail(c, 408, "REQUEST_TIMEOUT", "the request body did not arrive in time"); break;
        case ST_DISPATCHED:  // a streamed body stalled: its reader fails, the handler answers and closes
            if (c->streamed && !c->message_done && c->reading) {
                pthread_mutex_lock(&c->lock);
                c->serror = 1;
                pthread_cond_broadcast(&c->cond);
                pthread_mutex_unlock(&c->lock);
                c->deadline = 0;
            }
            break;
        default: ehi_conn_close(c); break;
        }
    }
    if (!c) s->sweep_next = NULL;  // the end: the next tick starts at the head (new connections are added there)
}

void ehi_close_server_handles(eh_server *s) {
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
            ehi_conn_flush(c);
            if (resume && !c->closing && c->state == ST_DISPATCHED) ehi_start_reading(c);
            if (close) ehi_conn_close(c);
        }
        eh_conn_release(c);
    }
    if (phase >= 1 && s->stop_phase_seen < 1) {
        s->stop_phase_seen = 1;
        uv_close((uv_handle_t *)&s->listener, NULL);
        for (eh_conn *c = s->conns, *next; c; c = next) {  // nothing in flight: close
            next = c->next;
            if (c->state != ST_DISPATCHED) ehi_conn_close(c);
        }
    }
    if (phase >= 2 && s->stop_phase_seen < 2) {
        s->stop_phase_seen = 2;
        uint64_t now = uv_now(&s->loop);
        for (eh_conn *c = s->conns, *next; c; c = next) {  // answers being written get a moment to go out
            next = c->next;
            pthread_mutex_lock(&c->lock);
            int drained = c->queued == 0 && c->out_head == NULL && c->file == NULL;
            pthread_mutex_unlock(&c->lock);
            if (drained) {
                ehi_conn_close(c);
            } else {
                c->close_after_write = 1;
                c->write_deadline = now + 1000;
            }
        }
    }
    if (s->stop_phase_seen == 2 && s->conns == NULL) ehi_close_server_handles(s);
}

// Threads are named (else they inherit the starting thread's name) so that `top -H`, perf and /proc tell the loop
// from the workers.
static void *loop_main(void *arg) {
    eh_server *s = arg;
    pthread_setname_np(pthread_self(), "cloudlet-loop");
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void *worker_main(void *arg) {
    eh_server *s = arg;
    pthread_setname_np(pthread_self(), "cloudlet-http");
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
    // libuv writes with write(2): a client that has gone would raise SIGPIPE, whose default kills the process.
    // Ignored process-wide (as civetweb did); the write then fails with EPIPE and the connection is closed.
    signal(SIGPIPE, SIG_IGN);
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
