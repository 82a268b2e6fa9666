#include "redis/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "core/log.h"

namespace rankd {

std::string TakeOpenSslErrors(std::string_view fallback) {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? std::string(fallback) : out;
}

TlsClientContext::~TlsClientContext() { SSL_CTX_free(ctx_); }

Result<std::shared_ptr<const TlsClientContext>> TlsClientContext::Make(
    const RedisEndpoint& endpoint) {
  const RedisTls& tls = endpoint.tls;
  auto bad = [&](std::string what) {
    return Fail(Error::InvalidParam("redis endpoint '" + endpoint.name + "': TLS: " + what + ": " +
                                    TakeOpenSslErrors("unknown OpenSSL error")));
  };
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return bad("cannot create a context");
  std::shared_ptr<const TlsClientContext> out(new TlsClientContext(ctx, tls.verify));
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) return bad("TLS 1.2 minimum");
  if (!tls.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, tls.ca_file.c_str(), nullptr) != 1)
      return bad("cannot load the CA file '" + tls.ca_file + "'");
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return bad("cannot load OpenSSL's default trust store");
  }
  if (tls.cert_file.empty() != tls.key_file.empty())
    return Fail(Error::InvalidParam("redis endpoint '" + endpoint.name +
                                    "': TLS: a client certificate needs its key and a key its "
                                    "certificate (tls_cert and tls_key go together)"));
  if (!tls.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, tls.cert_file.c_str()) != 1)
      return bad("cannot load the client certificate '" + tls.cert_file + "'");
    if (SSL_CTX_use_PrivateKey_file(ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      return bad("cannot load the client key '" + tls.key_file + "'");
    if (SSL_CTX_check_private_key(ctx) != 1)
      return bad("the client key '" + tls.key_file + "' does not match the certificate '" +
                 tls.cert_file + "'");
  }
  // AES-128-GCM first (Redis follows the client's order by default): the cheaper of
  // the two AES suites, and as strong as what managed Redis services require.
  if (SSL_CTX_set_ciphersuites(ctx,
                               "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                               "TLS_CHACHA20_POLY1305_SHA256") != 1)
    return bad("cannot set the TLS 1.3 cipher suites");
  // Records are read from a memory BIO: reading ahead takes a whole record (or more) per
  // BIO call instead of a header, then its body.
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_verify(ctx, tls.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  // TLS 1.2 renegotiation: a peer that asks for it over and over could keep a shard's
  // loop in handshakes. Refused (OpenSSL answers a no_renegotiation alert), and the
  // transport ends the connection when it sees that alert go out.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  // Each connection makes one session and keeps it: no client-side session cache.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // Partial writes and a moving write buffer: the transport hands SSL_write its whole
  // pending output and retries with whatever is left, from wherever it now lives.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return out;
}

Status LoadRedisTls(std::vector<RedisEndpoint>& endpoints) {
  for (RedisEndpoint& ep : endpoints) {
    if (!ep.tls.enabled) continue;
    auto ctx = TlsClientContext::Make(ep);
    if (!ctx) return Fail(std::move(ctx.error()));
    ep.tls.context = std::move(*ctx);
    if (!ep.tls.verify)
      LogWarn("redis endpoint " + ep.Label() +
              ": tls_verify=off: the server's certificate and host name are NOT checked");
  }
  return {};
}

}  // namespace rankd
