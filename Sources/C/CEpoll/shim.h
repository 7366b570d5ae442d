// Linux primitives the event loops need that Swift's Glibc module does not expose: epoll and eventfd
// (ConnectionLoop's Poller), and malloc_trim (HeapTrim).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <malloc.h>
