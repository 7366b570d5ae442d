#include <gmime/gmime.h>

// GMime's type checks and casts are macros, which Swift does not import: these wrap the ones MailMIME uses.
static inline int sf_gmime_is_multipart(GMimeObject *object) { return GMIME_IS_MULTIPART(object); }
static inline int sf_gmime_is_message_part(GMimeObject *object) { return GMIME_IS_MESSAGE_PART(object); }
static inline int sf_gmime_is_part(GMimeObject *object) { return GMIME_IS_PART(object); }
static inline int sf_gmime_is_text_part(GMimeObject *object) { return GMIME_IS_TEXT_PART(object); }
static inline int sf_internet_address_is_mailbox(InternetAddress *address) {
    return INTERNET_ADDRESS_IS_MAILBOX(address);
}
static inline int sf_internet_address_is_group(InternetAddress *address) {
    return INTERNET_ADDRESS_IS_GROUP(address);
}
static inline void sf_g_object_unref(void *object) { g_object_unref(object); }
