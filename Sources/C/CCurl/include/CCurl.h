#ifndef SIGNALFETCH_CCURL_H
#define SIGNALFETCH_CCURL_H

#include <curl/curl.h>

/* Typed wrappers over libcurl's variadic calls, which Swift cannot call directly. */

typedef size_t (*sfcurl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);

CURLcode sfcurl_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode sfcurl_easy_setopt_int64(CURL *handle, CURLoption option, curl_off_t value);
CURLcode sfcurl_easy_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode sfcurl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode sfcurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode sfcurl_easy_setopt_data_callback(CURL *handle, CURLoption option, sfcurl_data_callback value);
CURLcode sfcurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode sfcurl_easy_getinfo_double(CURL *handle, CURLINFO info, double *value);
CURLcode sfcurl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value);
CURLMcode sfcurl_multi_setopt_long(CURLM *handle, CURLMoption option, long value);

#endif
