"""An independent ES256 JWT implementation for JWTTests, built on `cryptography`: it checks our token and signs one
of its own for us to accept.

Usage: jwt_verify.py DIR TOKEN — DIR holds ours.pub.pem, the public key TOKEN must verify with. Writes a fresh
P-256 key to DIR as theirs.p8 (PKCS#8 PEM) and theirs.pub.pem (SubjectPublicKeyInfo PEM). Prints one JSON object:
{"ours": whether TOKEN verifies, "tampered": whether TOKEN with its last three characters changed verifies,
"theirs": a token signed with the fresh key, header {"alg": "ES256", "kid": "THEIRKEY01"},
claims {"iss": "THEIRTEAM1", "iat": 1700000123}}.
"""
import base64
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature


def b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64e(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def verify(token, public_key):
    header, payload, signature = token.split(".")
    raw = b64d(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    try:
        public_key.verify(der, (header + "." + payload).encode(), ec.ECDSA(hashes.SHA256()))
        return True
    except InvalidSignature:
        return False


directory, token = sys.argv[1], sys.argv[2]
with open(directory + "/ours.pub.pem", "rb") as file:
    ours = serialization.load_pem_public_key(file.read())
tampered = token[:-3] + ("AAA" if token[-3:] != "AAA" else "BBB")
key = ec.generate_private_key(ec.SECP256R1())
with open(directory + "/theirs.p8", "wb") as file:
    file.write(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
with open(directory + "/theirs.pub.pem", "wb") as file:
    file.write(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
header = b64e(json.dumps({"alg": "ES256", "kid": "THEIRKEY01"}).encode())
payload = b64e(json.dumps({"iss": "THEIRTEAM1", "iat": 1700000123}).encode())
r, s = decode_dss_signature(key.sign((header + "." + payload).encode(), ec.ECDSA(hashes.SHA256())))
theirs = header + "." + payload + "." + b64e(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
print(json.dumps({"ours": verify(token, ours), "tampered": verify(tampered, ours), "theirs": theirs}))
