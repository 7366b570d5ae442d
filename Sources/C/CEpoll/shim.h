// Linux readiness primitives for the event loops (ConnectionLoop's Poller), not exposed by Swift's Glibc module.
#include <sys/epoll.h>
#include <sys/eventfd.h>
