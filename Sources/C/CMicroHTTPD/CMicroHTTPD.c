#include "CMicroHTTPD.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The API's certificate, replaceable while the daemon runs (see CMicroHTTPD.h). */

#define SFMHD_TLS_SLOTS 256
#define SFMHD_TLS_CHAIN 16

struct sfmhd_tls_entry {
    gnutls_pcert_st certs[SFMHD_TLS_CHAIN];
    unsigned int count;
    gnutls_privkey_t key;
};

struct sfmhd_tls_slot {
    int used;
    uint16_t port; /* 0 until the daemon is bound */
    struct sfmhd_tls_entry *current;
};

static pthread_mutex_t sfmhd_tls_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sfmhd_tls_bound = PTHREAD_COND_INITIALIZER;
static struct sfmhd_tls_slot sfmhd_tls_slots[SFMHD_TLS_SLOTS];

static void sfmhd_tls_entry_free(struct sfmhd_tls_entry *entry) {
    if (entry == NULL) return;
    for (unsigned int i = 0; i < entry->count; i++) gnutls_pcert_deinit(&entry->certs[i]);
    if (entry->key != NULL) gnutls_privkey_deinit(entry->key);
    free(entry);
}

static void sfmhd_tls_error(char *error, size_t length, const char *what, int code) {
    if (error == NULL || length == 0) return;
    if (code == 0) snprintf(error, length, "%s", what);
    else snprintf(error, length, "%s (%s)", what, gnutls_strerror(code));
}

/* Whether the certificate's public key is the private key's. */
static int sfmhd_tls_key_matches(gnutls_pcert_st *certificate, gnutls_privkey_t key) {
    gnutls_pubkey_t derived = NULL;
    gnutls_datum_t a = {NULL, 0}, b = {NULL, 0};
    int matches = 0;
    if (gnutls_pubkey_init(&derived) == 0 && gnutls_pubkey_import_privkey(derived, key, 0, 0) == 0 &&
        gnutls_pubkey_export2(derived, GNUTLS_X509_FMT_DER, &a) == 0 &&
        gnutls_pubkey_export2(certificate->pubkey, GNUTLS_X509_FMT_DER, &b) == 0) {
        matches = a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
    }
    gnutls_free(a.data);
    gnutls_free(b.data);
    if (derived != NULL) gnutls_pubkey_deinit(derived);
    return matches;
}

int sfmhd_tls_slot_open(void) {
    pthread_mutex_lock(&sfmhd_tls_lock);
    int found = -1;
    for (int i = 0; i < SFMHD_TLS_SLOTS && found < 0; i++) {
        if (!sfmhd_tls_slots[i].used) {
            sfmhd_tls_slots[i].used = 1;
            sfmhd_tls_slots[i].port = 0;
            sfmhd_tls_slots[i].current = NULL;
            found = i;
        }
    }
    pthread_mutex_unlock(&sfmhd_tls_lock);
    return found;
}

int sfmhd_tls_slot_set(int slot, const char *certificate, size_t certificate_length, const char *key,
                       size_t key_length, char *error, size_t error_length) {
    if (slot < 0 || slot >= SFMHD_TLS_SLOTS) return -1;
    struct sfmhd_tls_entry *entry = calloc(1, sizeof *entry);
    if (entry == NULL) return -1;
    gnutls_datum_t chain = {(unsigned char *)certificate, (unsigned int)certificate_length};
    entry->count = SFMHD_TLS_CHAIN;
    int status = gnutls_pcert_list_import_x509_raw(entry->certs, &entry->count, &chain, GNUTLS_X509_FMT_PEM, 0);
    if (status < 0 || entry->count == 0) {
        entry->count = 0;
        sfmhd_tls_entry_free(entry);
        sfmhd_tls_error(error, error_length, "the certificate is not a PEM chain of at most 16", status);
        return -1;
    }
    gnutls_datum_t pem = {(unsigned char *)key, (unsigned int)key_length};
    status = gnutls_privkey_init(&entry->key);
    if (status == 0) status = gnutls_privkey_import_x509_raw(entry->key, &pem, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (status < 0) {
        sfmhd_tls_entry_free(entry);
        sfmhd_tls_error(error, error_length, "the private key is not a PEM key", status);
        return -1;
    }
    if (!sfmhd_tls_key_matches(&entry->certs[0], entry->key)) {
        sfmhd_tls_entry_free(entry);
        sfmhd_tls_error(error, error_length, "the private key is not the certificate's", 0);
        return -1;
    }
    pthread_mutex_lock(&sfmhd_tls_lock);
    /* The entry replaced is not freed: a handshake that took it may still be using it. A reload every few weeks
       leaves a few kilobytes. */
    sfmhd_tls_slots[slot].current = entry;
    pthread_mutex_unlock(&sfmhd_tls_lock);
    return 0;
}

void sfmhd_tls_slot_bind(int slot, uint16_t port) {
    if (slot < 0 || slot >= SFMHD_TLS_SLOTS) return;
    pthread_mutex_lock(&sfmhd_tls_lock);
    sfmhd_tls_slots[slot].port = port;
    pthread_cond_broadcast(&sfmhd_tls_bound);
    pthread_mutex_unlock(&sfmhd_tls_lock);
}

void sfmhd_tls_slot_close(int slot) {
    if (slot < 0 || slot >= SFMHD_TLS_SLOTS) return;
    pthread_mutex_lock(&sfmhd_tls_lock);
    struct sfmhd_tls_entry *entry = sfmhd_tls_slots[slot].current;
    sfmhd_tls_slots[slot].used = 0;
    sfmhd_tls_slots[slot].port = 0;
    sfmhd_tls_slots[slot].current = NULL;
    pthread_cond_broadcast(&sfmhd_tls_bound);
    pthread_mutex_unlock(&sfmhd_tls_lock);
    sfmhd_tls_entry_free(entry); /* the daemon has stopped: no handshake holds it */
}

/* gnutls_certificate_retrieve_function2: the certificate of the slot bound to the port the connection came in on
   (libmicrohttpd sets the session's pointer to its connection). A connection accepted before its daemon's port is
   recorded waits for it, at most two seconds. */
static int sfmhd_tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                              const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
                              unsigned int *pcert_length, gnutls_privkey_t *privkey) {
    (void)req_ca_rdn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    struct MHD_Connection *connection = gnutls_session_get_ptr(session);
    if (connection == NULL) return -1;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == NULL) return -1;
    struct sockaddr_storage local;
    socklen_t length = sizeof local;
    if (getsockname(info->connect_fd, (struct sockaddr *)&local, &length) != 0) return -1;
    uint16_t port = local.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&local)->sin6_port)
                                                : ntohs(((struct sockaddr_in *)&local)->sin_port);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    struct sfmhd_tls_entry *entry = NULL;
    pthread_mutex_lock(&sfmhd_tls_lock);
    for (;;) {
        int pending = 0;
        for (int i = 0; i < SFMHD_TLS_SLOTS; i++) {
            if (!sfmhd_tls_slots[i].used) continue;
            if (sfmhd_tls_slots[i].port == port) entry = sfmhd_tls_slots[i].current;
            if (sfmhd_tls_slots[i].port == 0) pending = 1;
        }
        if (entry != NULL || !pending) break;
        if (pthread_cond_timedwait(&sfmhd_tls_bound, &sfmhd_tls_lock, &deadline) != 0) break;
    }
    pthread_mutex_unlock(&sfmhd_tls_lock);
    if (entry == NULL) return -1;
    *pcert = entry->certs;
    *pcert_length = entry->count;
    *privkey = entry->key;
    return 0;
}

void *sfmhd_tls_callback(void) {
    return (void *)&sfmhd_tls_retrieve;
}
