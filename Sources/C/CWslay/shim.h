// wslay: RFC 6455 WebSocket framing without I/O of its own (by nghttp2's author), under WebSocket's codec.
#include <wslay/wslay.h>
