// The front end: websocket frames: the handshake answer, text messages out, pings, pongs and close in.
#include "eventhttp_internal.h"

static size_t ws_frame_header(uint8_t *h, int opcode, size_t len);
static outbuf *ws_frame(int opcode, const void *payload, size_t len, int flags);

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
    outbuf *o = ehi_outbuf_new(NULL, 0, flags, KIND_DATA);
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
    outbuf *o = ehi_outbuf_new(msg, (size_t)n, 0, KIND_WS_UPGRADE);
    if (!o) return 0;
    pthread_mutex_lock(&c->lock);
    int ok = ehi_enqueue_locked(c, o);
    if (ok) ehi_mark_dirty(c);
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
        ehi_mark_dirty(c);
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    outbuf *o = ws_frame(0x1, bytes, length, 0);
    int ok = o && ehi_enqueue_locked(c, o);
    if (ok) ehi_mark_dirty(c);
    pthread_mutex_unlock(&c->lock);
    return ok;
}

void eh_ws_close(eh_conn *c) {
    uint8_t code[2] = {0x03, 0xE8};  // 1000: normal closure
    outbuf *o = ws_frame(0x8, code, 2, EH_CLOSE);
    if (!o) return;
    pthread_mutex_lock(&c->lock);
    if (ehi_enqueue_locked(c, o)) ehi_mark_dirty(c);
    pthread_mutex_unlock(&c->lock);
}

void ehi_ws_send_control(eh_conn *c, int opcode, const void *payload, size_t len, int flags) {
    outbuf *o = ws_frame(opcode, payload, len, flags);
    if (!o) return;
    pthread_mutex_lock(&c->lock);
    int ok = ehi_enqueue_locked(c, o);
    pthread_mutex_unlock(&c->lock);
    if (ok) ehi_conn_flush(c);
}

void ehi_switch_to_ws(eh_conn *c) {
    c->state = ST_WS;
    c->deadline = 0;
    c->last_rx = uv_now(&c->server->loop);
    c->ping_at = 0;
    ehi_replay_pending(c, ehi_ws_input);
}

void ehi_ws_input(eh_conn *c, const char *data, size_t n) {
    if (!grow((void **)&c->wsbuf, &c->wscap, c->wslen + n, 1)) {
        ehi_conn_close(c);
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
            ehi_ws_send_control(c, 0x8, code, 2, EH_CLOSE);
            return;
        }
        if (len > WS_FRAME_CAP || ((opcode & 0x8) && len > 125)) {
            uint8_t code[2] = {0x03, 0xF1};  // 1009: message too big
            ehi_ws_send_control(c, 0x8, code, 2, EH_CLOSE);
            return;
        }
        if (avail < hl + 4 + len) break;
        uint8_t *mask = f + hl, *payload = f + hl + 4;
        for (uint64_t i = 0; i < len; i++) payload[i] ^= mask[i & 3];
        if (opcode == 0x8) {
            ehi_ws_send_control(c, 0x8, payload, len >= 2 ? 2 : 0, EH_CLOSE);
            return;
        } else if (opcode == 0x9) {
            ehi_ws_send_control(c, 0xA, payload, (size_t)len, 0);
        } else if (opcode == 0xA) {
            c->ping_at = 0;
        }
        off += hl + 4 + (size_t)len;
    }
    memmove(c->wsbuf, c->wsbuf + off, c->wslen - off);
    c->wslen -= off;
}
