// RedisTransport: the bytes of one connection attempt to a Redis server, plain or TLS.
// A RedisConnection (connection.h) hands it RESP bytes to send and gets back the bytes the
// server sent. Under it, one non-blocking TCP socket watched by a libuv poll handle;
// with TLS, an OpenSSL session over two memory BIOs (the socket is never given to
// OpenSSL), so that every byte still moves through our own read(2) and send(2) calls on
// the loop, and the plain path stays one syscall per batch.
//
//   Connect --TCP connected--> [TLS handshake] --> OnTransportConnected
//       any failure (refused, reset, handshake, verification) --> OnTransportFailed
//
// Lifetime: Open() returns a transport that lives until Close(). Close() may be called
// from inside any of the listener's callbacks; the transport then touches nothing of its
// own after the callback returns, and frees itself once libuv has closed its handle.
// After OnTransportFailed the transport is dead but still owned: the owner Closes it.
//
// Threads: the loop thread of `loop` only.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "redis/endpoint.h"

typedef struct ssl_st SSL;
typedef struct bio_st BIO;

namespace rankd {

class TransportListener {
 public:
  // TCP is connected and, with TLS, the handshake and the certificate check are done.
  virtual void OnTransportConnected() = 0;
  // Bytes the server sent (decrypted with TLS), in order, in pieces of any size.
  virtual void OnTransportRead(std::string_view bytes) = 0;
  // The socket can take more (only while WatchWritable(true)).
  virtual void OnTransportWritable() = 0;
  // The attempt or connection failed: `why` says how ("connect failed: Connection
  // refused", "TLS handshake failed: certificate verify failed (certificate has
  // expired)", "server closed the connection"). Called at most once; nothing else
  // follows it.
  virtual void OnTransportFailed(std::string why) = 0;

 protected:
  ~TransportListener() = default;
};

class RedisTransport {
 public:
  // Starts a non-blocking connect to `ip`:`port` (an address literal). With tls.enabled,
  // a TLS session from tls.context follows, with SNI and certificate verification
  // against tls.server_name (an IP address is checked as one, and gets no SNI). On an
  // immediate failure (socket(2), a bad address, no TLS context) returns nullptr and
  // says why in `*why`; no callback follows then.
  static RedisTransport* Open(uv_loop_t* loop, const std::string& ip, int port, const RedisTls& tls,
                              TransportListener* listener, std::string* why);

  // Stops every callback and frees the transport (soon, from the loop).
  void Close();

  // Sends what it can of `bytes` now and returns how many it took (0 when the socket is
  // full); the caller keeps the rest and offers it again after OnTransportWritable.
  // With TLS, taken bytes are encrypted at once and what the socket does not take is
  // kept here and sent before OnTransportWritable. -1: the connection failed; `error()`
  // says why (no callback follows from this call). REQUIRES: connected.
  ptrdiff_t Write(std::string_view bytes);
  // Asks for OnTransportWritable (on: once the socket can take more).
  void WatchWritable(bool on);

  const std::string& error() const { return error_; }

 private:
  enum class Phase : uint8_t { kConnecting, kHandshaking, kConnected, kFailed, kClosed };

  RedisTransport(uv_loop_t* loop, TransportListener* listener) : loop_(loop), listener_(listener) {}
  ~RedisTransport();

  static void OnPoll(uv_poll_t* handle, int status, int events);
  void HandleEvents(int status, int events);
  void FinishConnect();
  void StepHandshake();
  void ReadPlain();
  void ReadTls();
  bool FlushCipher();  // sends the TLS output waiting; false: failed (error_ set)
  bool KeepCipher(const char* rest, size_t size);
  bool SetupTls(const RedisTls& tls);
  // OpenSSL's info callback: notes a no_renegotiation alert we send (a server asked to
  // renegotiate), for ReadTls to end the connection.
  static void OnTlsInfo(const SSL* ssl, int where, int ret);
  void Fail(std::string why);  // -> kFailed, OnTransportFailed
  void UpdatePoll();

  uv_loop_t* loop_;
  TransportListener* listener_;
  uv_poll_t poll_{};
  int fd_ = -1;
  int events_ = 0;  // what poll_ watches now
  Phase phase_ = Phase::kConnecting;
  bool want_writable_ = false;  // the owner asked (WatchWritable)
  std::string error_;

  SSL* ssl_ = nullptr;
  BIO* net_in_ = nullptr;   // ciphertext read from the socket, for OpenSSL (owned by ssl_)
  BIO* net_out_ = nullptr;  // ciphertext OpenSSL made, for the socket (owned by ssl_)
  std::string cipher_out_;  // ciphertext taken from net_out_ that the socket did not
  size_t cipher_sent_ = 0;  // take at once, and how much of it it has taken since
  bool renegotiation_asked_ = false;  // set by OnTlsInfo
};

}  // namespace rankd
