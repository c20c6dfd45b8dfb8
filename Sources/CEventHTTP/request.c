// The front end: request framing over http-parser: headers, bodies (whole, oversized, streamed), dispatch to
// the workers, the next request.
#include "eventhttp_internal.h"

static void reset_request(eh_conn *c);
static void dispatch(eh_conn *c);
static eh_conn *conn_of(http_parser *p);
static int append_head(eh_conn *c, const char *at, size_t len);
static int on_message_begin(http_parser *p);
static int on_url(http_parser *p, const char *at, size_t len);
static int is_token(const char *at, size_t len);
static int on_header_field(http_parser *p, const char *at, size_t len);
static int on_header_value(http_parser *p, const char *at, size_t len);
static int header_is(eh_conn *c, size_t i, const char *name, const char *value);
static int on_headers_complete(http_parser *p);
static int on_body(http_parser *p, const char *at, size_t len);
static int on_message_complete(http_parser *p);

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
        ehi_conn_close(c);
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
    if (expect) ehi_respond_now(c, "HTTP/1.1 100 Continue\r\n\r\n", 25, 0);
    if (c->streamed) {
        c->deadline = now + (uint64_t)s->cfg.body_timeout_ms;
        pthread_mutex_lock(&c->lock);
        c->slen = 0;
        c->swant = 1;
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
        if (c->filling && at == (const char *)c->sbuf + c->slen) {
            c->slen += len;  // read there by the socket (ehi_body_direct)
        } else if (grow((void **)&c->sbuf, &c->scap, c->slen + len, 1)) {
            memcpy(c->sbuf + c->slen, at, len);
            c->slen += len;
        } else {
            c->serror = 1;
        }
        // A direct read stops at STREAM_READ_AHEAD, its buffer's size; a copy at STREAM_BUFFER_CAP, so that growing
        // the buffer for the last read never doubles it past STREAM_READ_AHEAD.
        int full = c->slen >= (c->filling ? STREAM_READ_AHEAD : STREAM_BUFFER_CAP);
        // Wake the handler only once it has what it waits for (eh_body_read): one wake-up per buffer it fills,
        // not one per socket read. During a direct read the handler cannot take the buffer yet: the read's end
        // wakes it (ehi_body_direct_done).
        if (!c->filling && (c->slen >= c->swant || full || c->serror)) pthread_cond_broadcast(&c->cond);
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

/// Where the loop reads next from a connection whose streamed body is being received: straight into the handler's
/// buffer after the bytes it holds, so that on_body has nothing to copy (the body's bytes are copied once, by the
/// kernel, before the handler writes them). Only for a plain connection (TLS decrypts into a buffer of its own) and
/// a body with a Content-Length, and never past the body's end (a pipelined request after it goes through the read
/// buffer). 1 when `buf` was set; then the buffer stays the loop's until ehi_body_direct_done.
int ehi_body_direct(eh_conn *c, uv_buf_t *buf) {
    http_parser *p = &c->parser;
    if (c->ssl || c->state != ST_DISPATCHED || !c->streamed || c->message_done || c->closing) return 0;
    if ((p->flags & F_CHUNKED) || !(p->flags & F_CONTENTLENGTH) || p->content_length == 0) return 0;
    if (HTTP_PARSER_ERRNO(p) != HPE_OK) return 0;
    pthread_mutex_lock(&c->lock);
    int ok = grow((void **)&c->sbuf, &c->scap, STREAM_READ_AHEAD, 1) && c->slen < c->scap && !c->serror;
    if (ok) {
        size_t room = c->scap - c->slen;
        size_t n = room < p->content_length ? room : (size_t)p->content_length;
        *buf = uv_buf_init((char *)c->sbuf + c->slen, (unsigned)n);
        c->filling = 1;
    }
    pthread_mutex_unlock(&c->lock);
    return ok;
}

/// The direct read ehi_body_direct set up has been parsed (or failed): the handler may take the buffer again. It is
/// woken only if what it waits for is there now (wait_for_body), as on_body would have: once per piece, not once
/// per socket read.
void ehi_body_direct_done(eh_conn *c) {
    pthread_mutex_lock(&c->lock);
    c->filling = 0;
    if (c->slen >= c->swant || c->sdone || c->serror) pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
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

void ehi_append_pending(eh_conn *c, const char *data, size_t n) {
    if (n == 0) return;
    if (!grow((void **)&c->pend, &c->pcap, c->plen + n, 1)) {
        ehi_conn_close(c);
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


void ehi_parse(eh_conn *c, const char *data, size_t n) {
    if (c->state == ST_IDLE) {
        c->state = ST_HEAD;
        c->deadline = uv_now(&c->server->loop) + (uint64_t)c->server->cfg.header_timeout_ms;
    }
    size_t used = http_parser_execute(&c->parser, &settings, data, n);
    if (c->closing) return;
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
    if (e == HPE_PAUSED) {
        if (used < n) ehi_append_pending(c, data + used, n - used);
    } else if (e != HPE_OK) {
        if (c->error_status) {
            ehi_fail(c, c->error_status, "BAD_REQUEST", c->error_reason);
        } else {
            char reason[200];
            snprintf(reason, sizeof reason, "malformed request: %s", http_errno_description(e));
            ehi_fail(c, 400, "BAD_REQUEST", reason);
        }
    } else if (used < n) {
        ehi_fail(c, 400, "BAD_REQUEST", "malformed request");
    }
}

/// Feeds what arrived while a request was in flight to `consume` (the parser, or the websocket reader once the
/// connection switched), and reads again if the pile had stopped reading.
void ehi_replay_pending(eh_conn *c, void (*consume)(eh_conn *, const char *, size_t)) {
    if (c->pending_full) {
        c->pending_full = 0;
        ehi_start_reading(c);
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
void ehi_request_done(eh_conn *c) {
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
    ehi_replay_pending(c, ehi_parse);
}

/// Waits (holding c->lock) for `want` buffered body bytes (at most what the loop keeps before it stops reading), the
/// end of the body, or an error: the handler then takes large pieces, and the loop wakes it once per piece.
static void wait_for_body(eh_conn *c, size_t want) {
    if (want > STREAM_BUFFER_CAP) want = STREAM_BUFFER_CAP;
    if (want == 0) want = 1;
    c->swant = want;
    while ((c->slen < want && !c->sdone && !c->serror) || c->filling) pthread_cond_wait(&c->cond, &c->lock);
    c->swant = 1;
}

/// After the handler took bytes (holding c->lock): lets a paused loop read again once the buffer has room.
static void resume_if_room(eh_conn *c) {
    if (c->reader_paused && c->slen < STREAM_BUFFER_CAP / 2) {
        c->reader_paused = 0;
        c->want_resume = 1;
        ehi_mark_dirty(c);
    }
}

long eh_body_read(eh_request *r, void *buffer, size_t length) {
    eh_conn *c = r->conn;
    if (!r->streamed) return 0;
    pthread_mutex_lock(&c->lock);
    wait_for_body(c, length);
    long result;
    if (c->slen > 0) {
        size_t n = c->slen < length ? c->slen : length;
        memcpy(buffer, c->sbuf, n);
        memmove(c->sbuf, c->sbuf + n, c->slen - n);
        c->slen -= n;
        result = (long)n;
        resume_if_room(c);
    } else {
        result = c->sdone ? 0 : -1;
    }
    pthread_mutex_unlock(&c->lock);
    return result;
}

long eh_body_take(eh_request *r, void **buffer, size_t *capacity, size_t want) {
    eh_conn *c = r->conn;
    if (!r->streamed) return 0;
    pthread_mutex_lock(&c->lock);
    wait_for_body(c, want);
    long result;
    if (c->slen > 0) {  // never after the connection closed (it empties the buffer): the swap would leak
        uint8_t *full = c->sbuf;
        size_t full_cap = c->scap;
        result = (long)c->slen;
        // The handler's first call brings no buffer: give the loop one as large as the one it fills now, rather
        // than let it grow one from nothing (copying it as it doubles).
        uint8_t *empty = *buffer;
        size_t empty_cap = *capacity;
        if (!empty) {
            empty = malloc(full_cap);
            empty_cap = empty ? full_cap : 0;
        }
        c->sbuf = empty;
        c->scap = empty_cap;
        c->slen = 0;
        *buffer = full;
        *capacity = full_cap;
        resume_if_room(c);
    } else {
        result = c->sdone ? 0 : -1;
    }
    pthread_mutex_unlock(&c->lock);
    return result;
}
