#!/usr/bin/env python3
"""tests/fuzz/make_seeds.py - writes the seed corpus of each fuzz target into
tests/fuzz/corpus/<target>/: well-formed conversations that the fuzzer then
mutates. The seeds are committed; run this only to change them."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def store(op, key=b"", val=b""):
    return struct.pack("<IHHII", 0x52535442, 1, op, len(key), len(val)) + key + val


def auth(typ, status=0, body=b""):
    return struct.pack("<IHHII", 0x55415442, 1, typ, status, len(body)) + body


def chunks(*parts):  # fuzz_store_server: [client, length, bytes] each
    out = b""
    for client, data in parts:
        while data:
            out += bytes([client, min(len(data), 255)]) + data[:255]
            data = data[255:]
    return out


SET, GET, SET_OK, GET_VAL = 1, 2, 3, 4
HELLO, CHALLENGE, PROOF, RESULT = 1, 2, 3, 4
seeds = {
    "fuzz_store_server": {
        "set_get": bytes([0]) + chunks((0, store(SET, b"k", b"v") + store(GET, b"k"))),
        "parked": bytes([4]) + chunks((0, store(GET, b"late")), (1, store(SET, b"late", b"x" * 40))),
        "three": bytes([8]) + chunks((0, store(GET, b"a")), (1, store(GET, b"a")), (2, store(SET, b"a", b""))),
        "authed": bytes([3]) + chunks((0, store(SET, b"k", b"v") + store(GET, b"k"))),
        "authed_parked": bytes([7]) + chunks((0, store(GET, b"p")), (1, store(SET, b"p", b"q"))),
        "hello": bytes([1]) + chunks((0, auth(HELLO, body=bytes(32)) + auth(PROOF, body=bytes(32)))),
        "no_handshake": bytes([1]) + chunks((0, store(GET, b"k"))),
    },
    "fuzz_store_client": {
        "set_ok": bytes([0]) + store(SET_OK),
        "get_val": bytes([1]) + store(GET_VAL, val=b"value"),
        "get_long": bytes([1]) + store(GET_VAL, val=b"v" * 100),
        "mixed": bytes([0b00100100]) + store(SET_OK) + store(GET_VAL, val=b"abc") + store(GET_VAL),
        "refused": bytes([1]) + auth(RESULT, 3),
        "addr": b"127.0.0.1:29500",
    },
    "fuzz_auth": {
        "client_challenge": bytes([0]) + auth(CHALLENGE, body=bytes(64)) + auth(RESULT),
        "client_refused": bytes([0]) + auth(RESULT, 2),
        "server_hello": bytes([1]) + auth(HELLO, body=bytes(32)) + auth(PROOF, body=bytes(32)),
        "server_store_request": bytes([1]) + store(GET, b"k"),
        "server_no_secret": bytes([3]) + auth(HELLO, body=bytes(32)),
    },
}
for target, files in seeds.items():
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
