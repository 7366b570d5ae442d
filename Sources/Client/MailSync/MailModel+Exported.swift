// The wire model the store and its clients share (MailboxID, MailboxRole, MailAddress, MailAttachment) comes with
// this module.
@_exported import MailModel
