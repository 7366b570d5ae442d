#ifndef SIGNALFETCH_CMICROHTTPD_H
#define SIGNALFETCH_CMICROHTTPD_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* A non-variadic entry point to MHD_start_daemon: Swift cannot call variadic C functions.
   Options are passed as an MHD_OPTION_ARRAY terminated by MHD_OPTION_END. */
struct MHD_Daemon *sfmhd_start_daemon(unsigned int flags, uint16_t port,
                                      MHD_AccessHandlerCallback handler, void *handler_context,
                                      const struct MHD_OptionItem *options);

/* MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS) as a plain call.
   Writes the peer's printable address into buffer; returns 0 on success. */
int sfmhd_connection_client_address(struct MHD_Connection *connection, char *buffer, size_t length);

#endif
