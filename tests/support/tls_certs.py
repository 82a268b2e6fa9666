"""Certificates for the TLS tests, made with the `openssl` CLI in a temporary folder.

make_certs() returns a Certs with file paths:
  ca, ca_key          a test CA
  server, server_key  for the Redis server, signed by ca: CN and SAN localhost, IP 127.0.0.1
  client, client_key  a client certificate signed by ca (mutual TLS)
  other_ca            a CA that signed none of these (the wrong CA)
  expired             the server's key, certified by ca for January 2020 only
  dns_only            the server's key, certified by ca for DNS:localhost only (no IP SAN,
                      no key usage limits: a cluster node's certificate)

EC P-256 keys: quick to make. The expired certificate comes from `openssl ca`, since
`openssl x509` cannot backdate a certificate.
"""
import os
import subprocess

from harness import temp_dir


class Certs:
    pass


def _run(args, cwd):
    subprocess.run(["openssl"] + args, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def _key_and_csr(d, name, cn):
    _run(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}"], d)


def _sign(d, csr, out, ext_lines):
    ext = os.path.join(d, f"{out}.ext")
    with open(ext, "w") as f:
        f.write("\n".join(ext_lines) + "\n")
    _run(["x509", "-req", "-in", csr, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
          "-days", "30", "-out", out, "-extfile", ext], d)


def _self_signed_ca(d, name, cn):
    _run(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "30", "-subj", f"/CN={cn}"], d)


def _expired(d):
    os.makedirs(os.path.join(d, "issued"), exist_ok=True)
    open(os.path.join(d, "index.txt"), "w").close()
    with open(os.path.join(d, "serial"), "w") as f:
        f.write("1000\n")
    with open(os.path.join(d, "ca.cnf"), "w") as f:
        f.write("\n".join([
            "[ca]", "default_ca = test_ca", "[test_ca]", "dir = .", "database = index.txt",
            "serial = serial", "new_certs_dir = issued", "certificate = ca.crt",
            "private_key = ca.key", "default_md = sha256", "policy = anything",
            "copy_extensions = none", "x509_extensions = server_ext", "[anything]",
            "commonName = supplied", "[server_ext]",
            "subjectAltName = DNS:localhost,IP:127.0.0.1", ""]))
    _run(["ca", "-batch", "-config", "ca.cnf", "-startdate", "20200101000000Z", "-enddate",
          "20200201000000Z", "-in", "server.csr", "-out", "expired.crt", "-notext"], d)


def make_certs():
    d = temp_dir("rankd-tls-")
    _self_signed_ca(d, "ca", "rankd test CA")
    _self_signed_ca(d, "other_ca", "some other CA")
    _key_and_csr(d, "server", "localhost")
    _sign(d, "server.csr", "server.crt",
          ["subjectAltName = DNS:localhost,IP:127.0.0.1", "extendedKeyUsage = serverAuth"])
    # No extendedKeyUsage: a cluster node's bus connections present it as a client too.
    _sign(d, "server.csr", "dns_only.crt", ["subjectAltName = DNS:localhost"])
    _key_and_csr(d, "client", "rankd")
    _sign(d, "client.csr", "client.crt", ["extendedKeyUsage = clientAuth"])
    _expired(d)
    c = Certs()
    p = lambda n: os.path.join(d, n)  # noqa: E731
    c.dir = d
    c.ca, c.ca_key = p("ca.crt"), p("ca.key")
    c.server, c.server_key = p("server.crt"), p("server.key")
    c.client, c.client_key = p("client.crt"), p("client.key")
    c.other_ca = p("other_ca.crt")
    c.expired = p("expired.crt")
    c.dns_only = p("dns_only.crt")
    return c
