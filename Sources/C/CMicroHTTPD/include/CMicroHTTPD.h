#ifndef SIGNALFETCH_CMICROHTTPD_H
#define SIGNALFETCH_CMICROHTTPD_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* A non-variadic entry point to MHD_start_daemon: Swift cannot call variadic C functions.
   Options are passed as an MHD_OPTION_ARRAY terminated by MHD_OPTION_END. */
struct MHD_Daemon *sfmhd_start_daemon(unsigned int flags, uint16_t port,
                                      MHD_AcceptPolicyCallback accept_policy, void *accept_policy_context,
                                      MHD_AccessHandlerCallback handler, void *handler_context,
                                      const struct MHD_OptionItem *options);

/* MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS) as a plain call.
   Writes the peer's printable address into buffer; returns 0 on success. */
int sfmhd_connection_client_address(struct MHD_Connection *connection, char *buffer, size_t length);

/* MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT) as a plain call; 0 when unknown. */
uint16_t sfmhd_daemon_bind_port(struct MHD_Daemon *daemon);

/* MHD_OPTION_EXTERNAL_LOGGER takes a va_list callback, which Swift cannot implement. Pass
   sfmhd_logger_trampoline() as the logger and a struct sfmhd_logger as its context: each message is
   formatted (truncated to 1 KiB) and handed to callback(context, message). */
typedef void (*sfmhd_message_callback)(void *context, const char *message);
struct sfmhd_logger {
    sfmhd_message_callback callback;
    void *context;
};
intptr_t sfmhd_logger_trampoline(void);

#endif
