// The wire model an envelope is given in (MailAddress) comes with this module.
@_exported import MailModel
