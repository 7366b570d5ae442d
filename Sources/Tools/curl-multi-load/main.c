// curl-multi-load: the reference libcurl client loop for the transport benchmark.
//
// It drives libcurl's multi interface directly from C, the way libcurl's own examples do: N GETs of one URL,
// `--concurrency` at a time, multiplexed over one HTTP/2 connection (CURLPIPE_MULTIPLEX, PIPEWAIT), reusing
// easy handles. Its rate is the ceiling any libcurl-based client (HTTPClient included) can reach on this machine,
// so `Scripts/bench transport` reports HTTPClient against it as well as against h2load.
//
// usage: curl-multi-load URL CA_FILE COUNT CONCURRENCY WARMUP
// prints one JSON line: {"benchmark":"curl-multi-load","requests":N,"ok":N,"failed":N,"seconds":S,"rate":R}
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static size_t discard(char *data, size_t size, size_t count, void *user) {
    (void)data;
    (void)user;
    return size * count;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void prepare(CURL *easy, const char *url, const char *ca_file) {
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(easy, CURLOPT_CAINFO, ca_file);
    curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
}

// Runs `total` requests, `concurrency` at a time; returns the number answered with 200.
static long run(CURLM *multi, const char *url, const char *ca_file, long total, long concurrency, long *failed) {
    long started = 0, finished = 0, ok = 0;
    for (long i = 0; i < concurrency && started < total; i++, started++) {
        CURL *easy = curl_easy_init();
        prepare(easy, url, ca_file);
        curl_multi_add_handle(multi, easy);
    }
    while (finished < total) {
        int running = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *message;
        int queued;
        while ((message = curl_multi_info_read(multi, &queued)) != NULL) {
            if (message->msg != CURLMSG_DONE) continue;
            CURL *easy = message->easy_handle;
            long status = 0;
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
            if (message->data.result == CURLE_OK && status == 200) ok++; else (*failed)++;
            finished++;
            curl_multi_remove_handle(multi, easy);
            if (started < total) {
                started++;
                curl_multi_add_handle(multi, easy);  // same options: reuse the handle
            } else {
                curl_easy_cleanup(easy);
            }
        }
        if (finished < total) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: curl-multi-load URL CA_FILE COUNT CONCURRENCY WARMUP\n");
        return 2;
    }
    const char *url = argv[1], *ca_file = argv[2];
    long count = atol(argv[3]), concurrency = atol(argv[4]), warmup = atol(argv[5]);
    if (count <= 0 || concurrency <= 0 || warmup < 0) {
        fprintf(stderr, "COUNT and CONCURRENCY must be positive, WARMUP not negative\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_ALL);
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 1L);
    long failed = 0;
    if (warmup > 0) run(multi, url, ca_file, warmup, concurrency, &failed);
    failed = 0;
    double start = now_seconds();
    long ok = run(multi, url, ca_file, count, concurrency, &failed);
    double elapsed = now_seconds() - start;
    printf("{\"benchmark\":\"curl-multi-load\",\"requests\":%ld,\"ok\":%ld,\"failed\":%ld,\"seconds\":%.3f,"
           "\"rate\":%.1f}\n", count, ok, failed, elapsed, (double)count / elapsed);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    return failed == 0 ? 0 : 1;
}
