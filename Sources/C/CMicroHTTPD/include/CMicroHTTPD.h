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

/* A TLS certificate the daemon serves, replaceable while it runs (a renewed certificate without a restart). Open a
   slot, set its certificate and key (PEM; the key must be the certificate's), pass sfmhd_tls_callback() as
   MHD_OPTION_HTTPS_CERT_CALLBACK's pointer, bind the slot to the daemon's port once it is started, and close it after
   the daemon stopped. Setting it again serves the new certificate to every new connection; connections already open
   keep theirs. sfmhd_tls_slot_set returns 0, or -1 with the reason in error. */
int sfmhd_tls_slot_open(void);
int sfmhd_tls_slot_set(int slot, const char *certificate, size_t certificate_length, const char *key,
                       size_t key_length, char *error, size_t error_length);
void sfmhd_tls_slot_bind(int slot, uint16_t port);
void sfmhd_tls_slot_close(int slot);
void *sfmhd_tls_callback(void);

#endif
