"""One message delivered over LMTP, as an MTA hands mail to mailboxd or Dovecot: the IMAP peers' way to make mail
arrive. Imported by imap_imaplib.py, imap_imapclient.py and imap_mbsync.py (their folder is on sys.path)."""
import smtplib
import time
import uuid


def deliver(host, port, user, subject, body=None):
    """Delivers a text/plain message from Carol to USER@example.com at HOST:PORT. Returns (the reply code to DATA
    for the one recipient, or the first non-success reply; the Message-ID)."""
    message_id = f"<{uuid.uuid4().hex}.{subject.replace(' ', '-')}@example.com>"
    message = (f"From: Carol <carol@example.com>\r\nTo: {user}@example.com\r\nSubject: {subject}\r\n"
               f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S +0000', time.gmtime())}\r\nMessage-ID: {message_id}\r\n"
               f"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n"
               f"{subject if body is None else body}\r\n").encode()
    with smtplib.LMTP(host, int(port), timeout=30) as lmtp:
        lmtp.ehlo_or_helo_if_needed()
        code, _ = lmtp.mail("carol@example.com")
        if code != 250:
            return code, message_id
        code, _ = lmtp.rcpt(f"{user}@example.com")
        if code not in (250, 251):
            return code, message_id
        code, _ = lmtp.data(message)
        return code, message_id
