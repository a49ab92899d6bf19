"""Transport security and authentication, configured with Pulsar's ``broker.conf`` keys.

* :mod:`braid.security.tls` builds the server and client TLS contexts from PEM files and reads a
  peer certificate's common name.
* :mod:`braid.security.api` is the contract of an authentication provider (Pulsar's
  ``AuthenticationProvider``): credentials in, a role out, or
  :class:`~braid.security.api.AuthenticationFailed`.
* :mod:`braid.security.tokens` (JWT), :mod:`braid.security.basic` (htpasswd) and
  :mod:`braid.security.tls_auth` (certificate CN) are the providers, named by Pulsar's class names.
* :mod:`braid.security.authentication` is the broker's one place that picks a provider for a
  CONNECT or an HTTP request and says which role the peer has.

Nothing here does I/O on a socket: the broker's connection and the admin app call into it.
"""
