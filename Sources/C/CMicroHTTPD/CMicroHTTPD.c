#include "CMicroHTTPD.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct MHD_Daemon *sfmhd_start_daemon(unsigned int flags, uint16_t port,
                                      MHD_AcceptPolicyCallback accept_policy, void *accept_policy_context,
                                      MHD_AccessHandlerCallback handler, void *handler_context,
                                      const struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, port, accept_policy, accept_policy_context, handler, handler_context,
                            MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

int sfmhd_connection_client_address(struct MHD_Connection *connection, char *buffer, size_t length) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || length == 0) return -1;
    const struct sockaddr *sa = info->client_addr;
    const char *ok = NULL;
    if (sa->sa_family == AF_INET) {
        ok = inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buffer, (socklen_t)length);
    } else if (sa->sa_family == AF_INET6) {
        ok = inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buffer, (socklen_t)length);
    }
    return ok == NULL ? -1 : 0;
}

uint16_t sfmhd_daemon_bind_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

static void sfmhd_log(void *cls, const char *format, va_list arguments) {
    const struct sfmhd_logger *logger = cls;
    char message[1024];
    if (logger == NULL || logger->callback == NULL || format == NULL) return;
    vsnprintf(message, sizeof message, format, arguments);
    logger->callback(logger->context, message);
}

intptr_t sfmhd_logger_trampoline(void) {
    return (intptr_t)&sfmhd_log;
}
