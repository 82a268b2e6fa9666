// TlsClientContext: one OpenSSL client context (SSL_CTX) per TLS endpoint, configured
// once at start-up from the endpoint's RedisTls files: TLS 1.2 or later, the CA file
// (else OpenSSL's default trust store), the client certificate and key for mutual TLS,
// and peer verification unless the endpoint opted out.
//
// Threads: LoadRedisTls runs on the main thread before any shard starts. After that the
// context is read-only and shared: OpenSSL allows SSL_new on one SSL_CTX from many
// threads at once, so every shard's connections make their sessions from it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "redis/endpoint.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace rankd {

class TlsClientContext {
 public:
  ~TlsClientContext();
  TlsClientContext(const TlsClientContext&) = delete;
  TlsClientContext& operator=(const TlsClientContext&) = delete;

  // Errors name the endpoint, the file and OpenSSL's reason.
  static Result<std::shared_ptr<const TlsClientContext>> Make(const RedisEndpoint& endpoint);

  SSL_CTX* ctx() const { return ctx_; }
  bool verify() const { return verify_; }

 private:
  TlsClientContext(SSL_CTX* ctx, bool verify) : ctx_(ctx), verify_(verify) {}
  SSL_CTX* ctx_;
  bool verify_;
};

// Fills `tls.context` of every endpoint with tls.enabled; logs a warning for each
// endpoint with tls_verify=off. Errors as Make's.
Status LoadRedisTls(std::vector<RedisEndpoint>& endpoints);

// OpenSSL's error queue as one line ("error:0A000086:SSL routines::certificate verify
// failed"), emptied; `fallback` when the queue is empty. The thread's own queue.
std::string TakeOpenSslErrors(std::string_view fallback);

}  // namespace rankd
