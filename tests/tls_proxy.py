#!/usr/bin/env python3
"""A TLS terminator for the system tests (tests/https_test.sh): what nginx does in the
README's multi-host setup, in the smallest form. Accepts TLS on 127.0.0.1 (OpenSSL, through
Python's ssl module) and copies bytes both ways to a plain TCP backend on loopback; it does
not parse HTTP, so whatever the client sends (Host, the token) reaches the coordinator as
sent.

usage: tls_proxy.py --cert PEM --key PEM --backend PORT --port-file FILE

Listens on a free port, which it writes to FILE once it accepts connections. A failed
handshake (an untrusting client) closes that connection only. Runs until killed.
"""
import argparse
import os
import select
import socket
import ssl
import threading


def relay(tls, upstream):
    """Copies bytes both ways until either side closes. One thread per connection: an
    OpenSSL connection must not be read and written from two threads at once."""
    sides = {tls: upstream, upstream: tls}
    try:
        while True:
            ready = [tls] if tls.pending() else select.select(list(sides), [], [], 60)[0]
            if not ready:
                continue
            for src in ready:
                try:
                    data = src.recv(65536)
                except ssl.SSLWantReadError:  # a partial TLS record: wait for the rest
                    continue
                if not data:
                    return
                sides[src].sendall(data)
    except OSError:
        pass


def serve(conn, context, backend_port):
    try:
        conn.settimeout(10)  # the handshake
        tls = context.wrap_socket(conn, server_side=True)
        tls.settimeout(None)
    except (ssl.SSLError, OSError):
        conn.close()
        return
    try:
        upstream = socket.create_connection(("127.0.0.1", backend_port), timeout=10)
        upstream.settimeout(None)
    except OSError:
        tls.close()
        return
    relay(tls, upstream)
    upstream.close()
    tls.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--backend", type=int, required=True)
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(tmp, args.port_file)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, context, args.backend), daemon=True).start()


if __name__ == "__main__":
    main()
