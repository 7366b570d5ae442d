// http-parser (Node.js's, as Debian keeps it): the HTTP/1.1 request head of a WebSocket opening handshake.
#include <http_parser.h>

// The parser's bit fields as plain calls.
static inline unsigned int sfhp_method(const http_parser *parser) { return parser->method; }
static inline unsigned int sfhp_errno(const http_parser *parser) { return parser->http_errno; }
static inline unsigned int sfhp_upgrade(const http_parser *parser) { return parser->upgrade; }
