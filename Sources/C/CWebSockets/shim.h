// libwebsockets 4.1 for WebPushSimulator's WebSocket listener: the real header, plus small inline functions for
// what Swift cannot express (LWS_PRE padding, the creation-info struct and its lifetimes, the option macros).
#ifndef CWEBSOCKETS_SHIM_H
#define CWEBSOCKETS_SHIM_H

#include <libwebsockets.h>
#include <stdlib.h>
#include <string.h>

/// The protocol callback libwebsockets calls on its service thread.
typedef int (*cws_callback)(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len);

/// A listening context and what must outlive it (libwebsockets keeps pointers to the protocol table and the
/// interface name).
struct cws_server {
    struct lws_context *context;
    struct lws_vhost *vhost;
    struct lws_protocols *protocols;
    char *interface_name;
    char *protocol_name;
};

/// Frees a server made by cws_server_create (NULL is fine).
static inline void cws_server_destroy(struct cws_server *server) {
    if (server == NULL) return;
    if (server->context != NULL) lws_context_destroy(server->context);
    free(server->protocols);
    free(server->interface_name);
    free(server->protocol_name);
    free(server);
}

/// A context with one vhost listening on `interface_name`:`port` (0 picks a port), one WebSocket protocol
/// (the default for clients that name none) whose connections carry `connection_data_size` bytes of user data, and
/// `user` as the context's user pointer. NULL when it cannot listen.
static inline struct cws_server *cws_server_create(
    const char *interface_name, int port, const char *protocol_name, cws_callback callback, void *user,
    size_t connection_data_size, size_t rx_buffer_size) {
    struct cws_server *server = calloc(1, sizeof(struct cws_server));
    if (server == NULL) return NULL;
    server->protocols = calloc(2, sizeof(struct lws_protocols));
    server->interface_name = strdup(interface_name);
    server->protocol_name = strdup(protocol_name);
    if (server->protocols == NULL || server->interface_name == NULL || server->protocol_name == NULL) {
        cws_server_destroy(server);
        return NULL;
    }
    server->protocols[0].name = server->protocol_name;
    server->protocols[0].callback = callback;
    server->protocols[0].per_session_data_size = connection_data_size;
    server->protocols[0].rx_buffer_size = rx_buffer_size;

    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.options = LWS_SERVER_OPTION_EXPLICIT_VHOSTS | LWS_SERVER_OPTION_DISABLE_IPV6;
    info.user = user;
    info.port = CONTEXT_PORT_NO_LISTEN;
    server->context = lws_create_context(&info);
    if (server->context == NULL) {
        cws_server_destroy(server);
        return NULL;
    }
    memset(&info, 0, sizeof info);
    info.port = port;
    info.iface = server->interface_name;
    info.protocols = server->protocols;
    info.user = user;
    info.options = LWS_SERVER_OPTION_DISABLE_IPV6 | LWS_SERVER_OPTION_VALIDATE_UTF8;
    server->vhost = lws_create_vhost(server->context, &info);
    if (server->vhost == NULL) {
        cws_server_destroy(server);
        return NULL;
    }
    return server;
}

/// The port the server listens on.
static inline int cws_server_port(const struct cws_server *server) {
    return lws_get_vhost_listen_port(server->vhost);
}

/// The context's user pointer, from a connection's callback.
static inline void *cws_context_user(struct lws *wsi) { return lws_context_user(lws_get_context(wsi)); }

/// Writes one text frame (copied into a buffer with libwebsockets' pre-padding); false when the write failed.
static inline int cws_write_text(struct lws *wsi, const unsigned char *data, size_t length) {
    unsigned char *buffer = malloc(LWS_PRE + length + 1);
    if (buffer == NULL) return 0;
    memcpy(buffer + LWS_PRE, data, length);
    int written = lws_write(wsi, buffer + LWS_PRE, length, LWS_WRITE_TEXT);
    free(buffer);
    return written >= (int)length;
}

/// Whether the received fragment ends its message.
static inline int cws_is_final_fragment(struct lws *wsi) { return lws_is_final_fragment(wsi); }

/// Whether the message being received is binary.
static inline int cws_is_binary(struct lws *wsi) { return lws_frame_is_binary(wsi); }

/// Sets the close frame's status before the connection is closed by returning nonzero from the callback.
static inline void cws_close_with_status(struct lws *wsi, int status) {
    lws_close_reason(wsi, (enum lws_close_status)status, NULL, 0);
}

/// Errors and warnings only, to standard error.
static inline void cws_quiet_logging(void) { lws_set_log_level(LLL_ERR | LLL_WARN, NULL); }

#endif
