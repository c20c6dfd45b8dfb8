// civetweb 1.15 (Debian) dlopen()s "libssl.so" and looks up the OpenSSL 1.1 function table, which includes
// SSL_get_peer_certificate. OpenSSL 3 only has it as a macro for SSL_get1_peer_certificate, so civetweb's table
// holds NULL there and every HTTPS connection crashes after the handshake (civetweb issue #1334).
//
// This library's SONAME is "libssl.so" and it depends on the real libssl.so.3. Loaded with RTLD_GLOBAL before
// mg_init_library, civetweb's dlopen("libssl.so") finds it by SONAME and dlsym() resolves every symbol: the
// one below from here, all others from libssl.so.3. See reference/linux-swift-notes.md §4 (Gotcha 1).
#include <openssl/ssl.h>

#undef SSL_get_peer_certificate
X509 *SSL_get_peer_certificate(const SSL *s) { return SSL_get1_peer_certificate(s); }
