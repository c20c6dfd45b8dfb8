// The front end: queued output, writing (plain and TLS), JSON refusals, closing and lingering.
#include "eventhttp_internal.h"

static void json_escape(char *out, size_t size, const char *s);
static const char *reason_phrase(int status);
static void on_write(uv_write_t *req, int status);
static void write_raw(eh_conn *c, void *mem, size_t len, size_t account);
static void on_shutdown(uv_shutdown_t *req, int status);
static void begin_linger(eh_conn *c);
static void file_start(eh_conn *c, const outbuf *o, outbuf *rest);
static void file_pump(eh_conn *c);

// MARK: - Output

outbuf *ehi_outbuf_new(const void *bytes, size_t len, int flags, int kind) {
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
int ehi_enqueue_locked(eh_conn *c, outbuf *o) {
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
    outbuf *o = ehi_outbuf_new(bytes, length, flags, KIND_DATA);
    if (!o) return 0;
    pthread_mutex_lock(&c->lock);
    if (!ehi_enqueue_locked(c, o)) {
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    ehi_mark_dirty(c);
    if (flags & EH_WAIT) {
        while (!c->closed && c->queued > c->server->cfg.output_cap) pthread_cond_wait(&c->cond, &c->lock);
    }
    int ok = !c->closed;
    pthread_mutex_unlock(&c->lock);
    return ok;
}

int eh_conn_send_file(eh_conn *c, int fd, int64_t offset, int64_t length, int flags) {
    file_spec spec = {fd, offset, length};
    outbuf *o = malloc(sizeof *o + sizeof spec);
    if (!o) {
        close(fd);
        return 0;
    }
    o->next = NULL;
    o->len = 0;  // its bytes are counted as they are read
    o->flags = flags & ~EH_WAIT;
    o->kind = KIND_FILE;
    memcpy(o->data, &spec, sizeof spec);
    pthread_mutex_lock(&c->lock);
    int ok = !c->closed;
    if (ok) {
        ehi_enqueue_locked(c, o);
        ehi_mark_dirty(c);
    }
    pthread_mutex_unlock(&c->lock);
    if (!ok) {
        free(o);
        close(fd);
    }
    return ok;
}

/// From the loop thread: queue and write at once.
void ehi_respond_now(eh_conn *c, const void *bytes, size_t len, int flags) {
    outbuf *o = ehi_outbuf_new(bytes, len, flags, KIND_DATA);
    if (!o) return;
    pthread_mutex_lock(&c->lock);
    int ok = ehi_enqueue_locked(c, o);
    pthread_mutex_unlock(&c->lock);
    if (ok) ehi_conn_flush(c);
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
void ehi_fail(eh_conn *c, int status, const char *code, const char *reason) {
    if (c->closing || c->state == ST_LINGER) return;
    char escaped[256], body[400], msg[700];
    json_escape(escaped, sizeof escaped, reason);
    int blen = snprintf(body, sizeof body, "{\"serverErrorCode\":\"%s\",\"reason\":\"%s\"}", code, escaped);
    int n = snprintf(msg, sizeof msg,
        "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\n"
        "Connection: close\r\n\r\n%s",
        status, reason_phrase(status), blen, body);
    c->close_after_write = 1;
    c->state = ST_DISPATCHED;  // ehi_parse nothing more
    ehi_respond_now(c, msg, (size_t)n, EH_CLOSE);
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
        ehi_conn_close(c);
        return;
    }
    c->write_deadline = drained ? 0 : uv_now(&c->server->loop) + (uint64_t)c->server->cfg.idle_timeout_ms;
    if (c->file) {
        file_pump(c);
        return;
    }
    if (drained && c->close_after_write && c->state != ST_LINGER) ehi_conn_flush(c);
}

/// Hands `mem` (ownership passes) to libuv; `account` bytes of the queue are settled when it is written.
static void write_raw(eh_conn *c, void *mem, size_t len, size_t account) {
    write_req *w = malloc(sizeof *w);
    if (!w) {
        free(mem);
        ehi_conn_close(c);
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
        ehi_conn_close(c);
    }
}

/// Sends whatever TLS produced (handshake records, encrypted data).
void ehi_tls_pump(eh_conn *c, size_t account) {
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
        ehi_conn_close(c);
        return;
    }
    int n = BIO_read(c->wbio, mem, (int)pending);
    write_raw(c, mem, n > 0 ? (size_t)n : 0, account);
}


void ehi_conn_flush(eh_conn *c) {
    if (c->closing || c->file) return;  // a file body being sent flushes the rest when it is out
    pthread_mutex_lock(&c->lock);
    outbuf *o = c->out_head;
    c->out_head = c->out_tail = NULL;
    pthread_mutex_unlock(&c->lock);
    while (o && !c->closing) {
        outbuf *next = o->next;
        int flags = o->flags, kind = o->kind;
        if (kind == KIND_FILE) {
            file_start(c, o, next);
            free(o);
            return;
        }
        if (c->ssl) {
            if (o->len && SSL_write(c->ssl, o->data, (int)o->len) <= 0) {
                free(o);
                ehi_conn_close(c);
                break;
            }
            ehi_tls_pump(c, o->len);
            free(o);
        } else if (o->len && !o->flags && o->kind == KIND_DATA && next && !next->flags && next->kind == KIND_DATA) {
            // A run of plain pieces (websocket messages queued one by one): one write for all of them, not a
            // syscall and a TCP segment each. Nothing happens between them (no end of response, no close).
            size_t total = 0;
            outbuf *end = o;
            while (end && !end->flags && end->kind == KIND_DATA) {
                total += end->len;
                end = end->next;
            }
            char *mem = malloc(total);
            if (!mem) {
                for (outbuf *p = o; p != end;) {
                    outbuf *n = p->next;
                    free(p);
                    p = n;
                }
                o = end;
                ehi_conn_close(c);
                continue;
            }
            size_t at = 0;
            for (outbuf *p = o; p != end;) {
                outbuf *n = p->next;
                memcpy(mem + at, p->data, p->len);
                at += p->len;
                free(p);
                p = n;
            }
            write_raw(c, mem, total, total);
            o = end;
            continue;
        } else if (o->len) {
            // The outbuf is the write buffer: data lives after its header.
            size_t len = o->len;
            memmove(o, o->data, len);
            write_raw(c, o, len, len);
        } else {
            free(o);
        }
        if (flags & EH_CLOSE) c->close_after_write = 1;
        if (kind == KIND_WS_UPGRADE && !c->closing) ehi_switch_to_ws(c);
        if ((flags & EH_END) && !c->closing) ehi_request_done(c);
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

// MARK: - File bodies

static void free_list(outbuf *o) {
    while (o) {
        outbuf *next = o->next;
        free(o);
        o = next;
    }
}

void ehi_file_free(eh_conn *c) {
    file_body *f = c->file;
    if (!f) return;
    c->file = NULL;
    close(f->fd);
    free(f->buf);
    free_list(f->rest);
    free(f);
}

static void file_start(eh_conn *c, const outbuf *o, outbuf *rest) {
    file_spec spec;
    memcpy(&spec, o->data, sizeof spec);
    file_body *f = calloc(1, sizeof *f);
    if (!f) {
        close(spec.fd);
        free_list(rest);
        ehi_conn_close(c);
        return;
    }
    f->fd = spec.fd;
    f->offset = spec.offset;
    f->end = spec.offset + spec.length;
    f->flags = o->flags;
    f->rest = rest;
    f->req.data = c;
    c->file = f;
    // The kernel's readahead doubles for a file read in order, so the disk works while the loop writes.
    (void)posix_fadvise(f->fd, (off_t)f->offset, (off_t)spec.length, POSIX_FADV_SEQUENTIAL);
    file_pump(c);
}

/// The body is queued whole: apply the response's flags and write what was queued after it.
static void file_finish(eh_conn *c) {
    file_body *f = c->file;
    int flags = f->flags;
    outbuf *rest = f->rest;
    f->rest = NULL;
    ehi_file_free(c);
    if (rest) {
        outbuf *tail = rest;
        while (tail->next) tail = tail->next;
        pthread_mutex_lock(&c->lock);
        tail->next = c->out_head;
        c->out_head = rest;
        if (!c->out_tail) c->out_tail = tail;
        pthread_mutex_unlock(&c->lock);
    }
    if (flags & EH_CLOSE) c->close_after_write = 1;
    if ((flags & EH_END) && !c->closing) ehi_request_done(c);
    ehi_conn_flush(c);  // the rest, or the linger once everything is written
}

static void on_file_read(uv_fs_t *req) {
    eh_conn *c = req->data;
    file_body *f = c->file;
    ssize_t n = req->result;
    uv_fs_req_cleanup(req);
    f->reading = 0;
    char *buf = f->buf;
    f->buf = NULL;
    if (c->closing) {
        free(buf);
        ehi_file_free(c);
    } else if (n <= 0) {
        free(buf);
        logf_(c->server, "a file body ended %lld bytes early (%s); closing the connection",
            (long long)(f->end - f->offset), n < 0 ? uv_strerror((int)n) : "end of file");
        ehi_conn_close(c);
    } else {
        f->offset += n;
        pthread_mutex_lock(&c->lock);
        c->queued += (size_t)n;
        pthread_mutex_unlock(&c->lock);
        if (c->ssl) {
            int ok = SSL_write(c->ssl, buf, (int)n) > 0;
            free(buf);
            if (ok) ehi_tls_pump(c, (size_t)n);
            else ehi_conn_close(c);
        } else {
            write_raw(c, buf, (size_t)n, (size_t)n);  // the chunk is the write buffer: no copy
        }
        if (!c->closing) {
            if (f->offset >= f->end) file_finish(c);
            else file_pump(c);
        }
    }
    eh_conn_release(c);
}

/// Starts reading the next chunk unless one is being read or the queue is full.
static void file_pump(eh_conn *c) {
    file_body *f = c->file;
    if (!f || f->reading || c->closing) return;
    if (f->offset >= f->end) {
        file_finish(c);
        return;
    }
    int64_t left = f->end - f->offset;
    size_t want = left < FILE_CHUNK ? (size_t)left : FILE_CHUNK;
    pthread_mutex_lock(&c->lock);
    size_t queued = c->queued;
    pthread_mutex_unlock(&c->lock);
    if (queued > 0 && queued + want > c->server->cfg.output_cap) return;  // on_write calls again
    f->buf = malloc(want);
    if (!f->buf) {
        ehi_conn_close(c);
        return;
    }
    uv_buf_t b = uv_buf_init(f->buf, (unsigned)want);
    eh_conn_retain(c);
    f->reading = 1;
    if (uv_fs_read(&c->server->loop, &f->req, f->fd, &b, 1, f->offset, on_file_read) != 0) {
        f->reading = 0;
        eh_conn_release(c);
        ehi_conn_close(c);
    }
}

// MARK: - Closing

void ehi_on_closed(uv_handle_t *h) {
    eh_conn *c = h->data;
    pthread_mutex_lock(&c->lock);
    free(c->sbuf);
    c->sbuf = NULL;
    c->slen = c->scap = 0;
    outbuf *o = c->out_head;
    c->out_head = c->out_tail = NULL;
    pthread_mutex_unlock(&c->lock);
    while (o) {
        outbuf *next = o->next;
        free(o);
        o = next;
    }
    if (c->file && !c->file->reading) ehi_file_free(c);  // a read in flight frees it when it returns
    if (c->ssl) SSL_free(c->ssl);
    free(c->hbuf);
    free(c->hdrs);
    free(c->body);
    free(c->pend);
    free(c->wsbuf);
    eh_conn_release(c);
}

void ehi_conn_close(eh_conn *c) {
    if (c->closing) return;
    c->closing = 1;
    pthread_mutex_lock(&c->lock);
    c->closed = 1;
    c->serror = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    eh_server *s = c->server;
    if (s->sweep_next == c) s->sweep_next = c->next;
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->conn_count--;
    ehi_peer_adjust(s, c->peer, -1);
    uv_close((uv_handle_t *)&c->tcp, ehi_on_closed);
    ehi_conn_gone(c);
    if (s->stop_phase_seen == 2 && s->conns == NULL) ehi_close_server_handles(s);
}

void eh_conn_close(eh_conn *c) {
    pthread_mutex_lock(&c->lock);
    if (!c->closed) {
        c->want_close = 1;
        ehi_mark_dirty(c);
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
        ehi_conn_close(c);
        return;
    }
    c->state = ST_LINGER;
    c->deadline = uv_now(&c->server->loop) + LINGER_MS;
    pthread_mutex_lock(&c->lock);
    c->closed = 1;
    c->serror = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    ehi_conn_gone(c);
    if (c->ssl) {
        SSL_shutdown(c->ssl);
        ehi_tls_pump(c, 0);
    }
    uv_shutdown_t *req = malloc(sizeof *req);
    if (!req || uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        free(req);
        ehi_conn_close(c);
        return;
    }
    ehi_start_reading(c);
}
