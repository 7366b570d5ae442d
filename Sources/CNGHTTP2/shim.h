#include <nghttp2/nghttp2.h>
// Linux event primitives for the HTTP/2 server's event loop (not exposed by Swift's Glibc module).
#include <sys/epoll.h>
#include <sys/eventfd.h>
