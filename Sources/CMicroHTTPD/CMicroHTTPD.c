#include "CMicroHTTPD.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

struct MHD_Daemon *sfmhd_start_daemon(unsigned int flags, uint16_t port,
                                      MHD_AccessHandlerCallback handler, void *handler_context,
                                      const struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_context,
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
