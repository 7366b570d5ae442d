#include <nghttp2/nghttp2.h>
// Linux event primitives for both HTTP/2 event loops, the server's and the client's (HTTP2Support's Poller), not
// exposed by Swift's Glibc module.
#include <sys/epoll.h>
#include <sys/eventfd.h>
