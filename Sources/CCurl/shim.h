// libcurl from Debian's libcurl4-openssl-dev (OpenSSL flavour: a custom CA file works, HTTP/2 through nghttp2).
// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call; these typed wrappers can be.
#include <curl/curl.h>

typedef size_t (*cloudlet_curl_data_callback)(char *data, size_t size, size_t count, void *context);
typedef int (*cloudlet_curl_progress_callback)(
    void *context, curl_off_t download_total, curl_off_t download_now, curl_off_t upload_total, curl_off_t upload_now);

static inline CURLcode cloudlet_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode cloudlet_curl_set_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode cloudlet_curl_set_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode cloudlet_curl_set_data_callback(CURL *handle, CURLoption option, cloudlet_curl_data_callback f) {
    return curl_easy_setopt(handle, option, f);
}

static inline CURLcode cloudlet_curl_set_progress_callback(CURL *handle, cloudlet_curl_progress_callback f) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, f);
}

static inline CURLcode cloudlet_curl_get_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode cloudlet_curl_get_socket(CURL *handle, curl_socket_t *socket) {
    return curl_easy_getinfo(handle, CURLINFO_ACTIVESOCKET, socket);
}
