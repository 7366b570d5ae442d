"""The reference receiver for the Web Push sender's tests: http_ece (the library pywebpush encrypts with).

Usage: webpush_http_ece_decrypt.py PLAN.json — PLAN is {"privateKey": <b64url 32-byte scalar of the
subscription's key>, "auth": <b64url 16 bytes>, "bodies": [<b64url aes128gcm body>, …]}. Prints one JSON line per
body: {"ok": true, "plaintext": <UTF-8 text>, "length": <body bytes>} or {"ok": false, "error": <exception>}.
"""
import base64
import json
import sys

import http_ece
from cryptography.hazmat.primitives.asymmetric import ec


def unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


plan = json.load(open(sys.argv[1]))
key = ec.derive_private_key(int.from_bytes(unb64(plan["privateKey"]), "big"), ec.SECP256R1())
for body in plan["bodies"]:
    raw = unb64(body)
    try:
        plaintext = http_ece.decrypt(raw, private_key=key, auth_secret=unb64(plan["auth"]), version="aes128gcm")
        print(json.dumps({"ok": True, "plaintext": plaintext.decode("utf-8"), "length": len(raw)}), flush=True)
    except Exception as error:  # every failure is a result to report, not a crash
        print(json.dumps({"ok": False, "error": type(error).__name__}), flush=True)
