# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1", "wmill==1.850.0"]
# ///
"""Failure classes of a capture (issue 17 item 1; docs/internals.md "Failure class").

A failed page is classed from **what happened** — the answer's ``errorDetails.type``, the main
document's HTTP status, the Chromium ``net::ERR_*`` code or the Playwright message inside
``errorDetails.message`` — never from where the capture server threw it (v12 labels nearly
everything ``internal``):

* ``transient``: may succeed on a second try after the gap (connection reset/refused, timeouts,
  5xx, 429, 408, a crashed or closed browser, our own egress proxy or cache failing);
* ``permanent``: the same request would fail the same way (redirect loop, too many redirects,
  a download the policy refuses, any other 4xx, DNS name not found, TLS certificate errors,
  robots.txt, a request the capture server refuses as invalid);
* ``policy``: a rule of ours or the server's refused it (``errorDetails.type: policy``,
  private-host refusals ``url is not allowed``).

Only ``transient`` is retried (crawl_host). An unknown ``net::ERR_*`` code or an unknown
``errorDetails.type`` is classed ``transient`` (one retry at most, as before) with a note the
caller logs. A Windmill library script (no ``main``), imported as ``f.waggle.failures``.
"""

from __future__ import annotations

import re

TRANSIENT, PERMANENT, POLICY = "transient", "permanent", "policy"
CLASSES = (TRANSIENT, PERMANENT, POLICY)

# Chromium net/base/net_error_list.h names (without ERR_), by the class a capture should get.
_NET_TRANSIENT = """
    IO_PENDING FAILED TIMED_OUT UNEXPECTED INVALID_HANDLE INSUFFICIENT_RESOURCES OUT_OF_MEMORY
    SOCKET_NOT_CONNECTED FILE_NO_SPACE NETWORK_CHANGED SOCKET_IS_CONNECTED CONTEXT_SHUT_DOWN
    CONNECTION_CLOSED CONNECTION_RESET CONNECTION_REFUSED CONNECTION_ABORTED CONNECTION_FAILED
    INTERNET_DISCONNECTED ADDRESS_UNREACHABLE CONNECTION_TIMED_OUT HOST_RESOLVER_QUEUE_TOO_LARGE
    SSL_RENEGOTIATION_REQUESTED SSL_NO_RENEGOTIATION SSL_DECOMPRESSION_FAILURE_ALERT
    SSL_BAD_RECORD_MAC_ALERT SSL_HANDSHAKE_NOT_COMPLETED SSL_DECRYPT_ERROR_ALERT
    EARLY_DATA_REJECTED WRONG_VERSION_ON_EARLY_DATA ECH_NOT_NEGOTIATED INVALID_ECH_CONFIG_LIST
    WINSOCK_UNEXPECTED_WRITTEN_BYTES PRECONNECT_MAX_SOCKET_LIMIT NAME_RESOLUTION_FAILED
    TEMPORARILY_THROTTLED MSG_TOO_BIG WS_PROTOCOL_ERROR ADDRESS_IN_USE WS_THROTTLE_QUEUE_TOO_LARGE
    SOCKET_SET_RECEIVE_BUFFER_SIZE_ERROR SOCKET_SET_SEND_BUFFER_SIZE_ERROR
    SOCKET_RECEIVE_BUFFER_SIZE_UNCHANGEABLE SOCKET_SEND_BUFFER_SIZE_UNCHANGEABLE
    CT_STH_PARSING_FAILED CT_STH_INCOMPLETE CT_CONSISTENCY_PROOF_PARSING_FAILED
    UNABLE_TO_REUSE_CONNECTION_FOR_PROXY_AUTH WS_UPGRADE READ_IF_READY_NOT_IMPLEMENTED
    NO_BUFFER_SPACE
    TUNNEL_CONNECTION_FAILED PROXY_AUTH_UNSUPPORTED PROXY_AUTH_REQUESTED PROXY_CONNECTION_FAILED
    MANDATORY_PROXY_CONFIGURATION_FAILED PROXY_CERTIFICATE_INVALID SOCKS_CONNECTION_FAILED
    SOCKS_CONNECTION_HOST_UNREACHABLE HTTPS_PROXY_TUNNEL_RESPONSE_REDIRECT PAC_SCRIPT_FAILED
    NO_SUPPORTED_PROXIES PAC_NOT_IN_DHCP PROXY_AUTH_REQUESTED_WITH_NO_CONNECTION
    PROXY_HTTP_1_1_REQUIRED PAC_SCRIPT_TERMINATED
    EMPTY_RESPONSE NETWORK_IO_SUSPENDED SYN_REPLY_NOT_RECEIVED HTTP2_PROTOCOL_ERROR
    INCOMPLETE_HTTP2_HEADERS HTTP2_SERVER_REFUSED_STREAM HTTP2_PING_FAILED CONTENT_LENGTH_MISMATCH
    INCOMPLETE_CHUNKED_ENCODING QUIC_PROTOCOL_ERROR RESPONSE_HEADERS_TRUNCATED QUIC_HANDSHAKE_FAILED
    HTTP2_FLOW_CONTROL_ERROR HTTP2_FRAME_SIZE_ERROR HTTP2_COMPRESSION_ERROR
    HTTP2_RST_STREAM_NO_ERROR_RECEIVED HTTP2_PUSHED_STREAM_NOT_AVAILABLE
    HTTP2_CLAIMED_PUSHED_STREAM_RESET_BY_SERVER HTTP2_STREAM_CLOSED HTTP2_CLIENT_REFUSED_STREAM
    HTTP2_PUSHED_RESPONSE_DOES_NOT_MATCH QUIC_GOAWAY_REQUEST_CAN_BE_RETRIED
    INCONSISTENT_IP_ADDRESS_SPACE
    CACHE_MISS CACHE_READ_FAILURE CACHE_WRITE_FAILURE CACHE_OPERATION_NOT_SUPPORTED
    CACHE_OPEN_FAILURE CACHE_CREATE_FAILURE CACHE_RACE CACHE_CHECKSUM_READ_FAILURE
    CACHE_CHECKSUM_MISMATCH CACHE_LOCK_TIMEOUT CACHE_AUTH_FAILURE_AFTER_READ
    CACHE_ENTRY_NOT_SUITABLE CACHE_DOOM_FAILURE CACHE_OPEN_OR_CREATE_FAILURE
    FTP_SERVICE_UNAVAILABLE FTP_TRANSFER_ABORTED FTP_FILE_BUSY
    DNS_MALFORMED_RESPONSE DNS_SERVER_REQUIRES_TCP DNS_SERVER_FAILED DNS_TIMED_OUT DNS_CACHE_MISS
    DNS_SORT_ERROR DNS_SECURE_RESOLVER_HOSTNAME_RESOLUTION_FAILED DNS_REQUEST_CANCELLED
"""
_NET_PERMANENT = """
    ABORTED INVALID_ARGUMENT FILE_NOT_FOUND FILE_TOO_BIG ACCESS_DENIED NOT_IMPLEMENTED
    UPLOAD_FILE_CHANGED FILE_EXISTS FILE_PATH_TOO_LONG FILE_VIRUS_INFECTED
    UPLOAD_STREAM_REWIND_NOT_SUPPORTED BLOCKED_BY_RESPONSE BLOCKED_BY_CSP H2_OR_QUIC_REQUIRED
    BLOCKED_BY_ORB NAME_NOT_RESOLVED SSL_PROTOCOL_ERROR ADDRESS_INVALID SSL_CLIENT_AUTH_CERT_NEEDED
    NO_SSL_VERSIONS_ENABLED SSL_VERSION_OR_CIPHER_MISMATCH BAD_SSL_CLIENT_AUTH_CERT
    ALPN_NEGOTIATION_FAILED SSL_CLIENT_AUTH_PRIVATE_KEY_ACCESS_DENIED
    SSL_CLIENT_AUTH_CERT_NO_PRIVATE_KEY NETWORK_ACCESS_DENIED SSL_CLIENT_AUTH_SIGNATURE_FAILED
    SSL_BAD_PEER_PUBLIC_KEY SSL_PINNED_KEY_NOT_IN_CERT_CHAIN CLIENT_AUTH_CERT_TYPE_UNSUPPORTED
    SSL_SERVER_CERT_CHANGED SSL_UNRECOGNIZED_NAME_ALERT SSL_CLIENT_AUTH_CERT_BAD_FORMAT
    ICANN_NAME_COLLISION SSL_SERVER_CERT_BAD_FORMAT SSL_OBSOLETE_CIPHER
    SSL_CLIENT_AUTH_NO_COMMON_ALGORITHMS TLS13_DOWNGRADE_DETECTED SSL_KEY_USAGE_INCOMPATIBLE
    ECH_FALLBACK_CERTIFICATE_INVALID
    CERT_COMMON_NAME_INVALID CERT_DATE_INVALID CERT_AUTHORITY_INVALID CERT_CONTAINS_ERRORS
    CERT_NO_REVOCATION_MECHANISM CERT_UNABLE_TO_CHECK_REVOCATION CERT_REVOKED CERT_INVALID
    CERT_WEAK_SIGNATURE_ALGORITHM CERT_NON_UNIQUE_NAME CERT_WEAK_KEY CERT_NAME_CONSTRAINT_VIOLATION
    CERT_VALIDITY_TOO_LONG CERTIFICATE_TRANSPARENCY_REQUIRED CERT_SYMANTEC_LEGACY
    CERT_KNOWN_INTERCEPTION_BLOCKED CERT_END
    INVALID_URL DISALLOWED_URL_SCHEME UNKNOWN_URL_SCHEME INVALID_REDIRECT TOO_MANY_REDIRECTS
    UNSAFE_REDIRECT UNSAFE_PORT INVALID_RESPONSE INVALID_CHUNKED_ENCODING METHOD_NOT_SUPPORTED
    UNEXPECTED_PROXY_AUTH RESPONSE_HEADERS_TOO_BIG REQUEST_RANGE_NOT_SATISFIABLE MALFORMED_IDENTITY
    CONTENT_DECODING_FAILED ENCODING_CONVERSION_FAILED UNRECOGNIZED_FTP_DIRECTORY_LISTING_FORMAT
    INVALID_AUTH_CREDENTIALS UNSUPPORTED_AUTH_SCHEME ENCODING_DETECTION_FAILED
    MISSING_AUTH_CREDENTIALS UNEXPECTED_SECURITY_LIBRARY_STATUS MISCONFIGURED_AUTH_ENVIRONMENT
    UNDOCUMENTED_SECURITY_LIBRARY_STATUS RESPONSE_BODY_TOO_BIG_TO_DRAIN
    RESPONSE_HEADERS_MULTIPLE_CONTENT_LENGTH RESPONSE_HEADERS_MULTIPLE_CONTENT_DISPOSITION
    RESPONSE_HEADERS_MULTIPLE_LOCATION HTTP2_INADEQUATE_TRANSPORT_SECURITY HTTP_1_1_REQUIRED
    INVALID_HTTP_RESPONSE CONTENT_DECODING_INIT_FAILED TOO_MANY_RETRIES HTTP_RESPONSE_CODE_FAILURE
    QUIC_CERT_ROOT_NOT_KNOWN TOO_MANY_ACCEPT_CH_RESTARTS
    INSECURE_RESPONSE NO_PRIVATE_KEY_FOR_CERT ADD_USER_CERT_FAILED INVALID_SIGNED_EXCHANGE
    INVALID_WEB_BUNDLE TRUST_TOKEN_OPERATION_FAILED TRUST_TOKEN_OPERATION_SUCCESS_WITHOUT_SENDING_REQUEST
    FTP_FAILED FTP_SYNTAX_ERROR FTP_COMMAND_NOT_SUPPORTED FTP_BAD_COMMAND_SEQUENCE
    PKCS12_IMPORT_BAD_PASSWORD PKCS12_IMPORT_FAILED IMPORT_CA_CERT_NOT_CA IMPORT_CERT_ALREADY_EXISTS
    IMPORT_CA_CERT_FAILED IMPORT_SERVER_CERT_FAILED PKCS12_IMPORT_INVALID_MAC
    PKCS12_IMPORT_INVALID_FILE PKCS12_IMPORT_UNSUPPORTED KEY_GENERATION_FAILED
    PRIVATE_KEY_EXPORT_FAILED SELF_SIGNED_CERT_GENERATION_FAILED CERT_DATABASE_CHANGED
    CERT_VERIFIER_CHANGED
    DNS_SEARCH_EMPTY DNS_NAME_HTTPS_ONLY DNS_NO_MATCHING_SUPPORTED_ALPN
"""
_NET_POLICY = """
    BLOCKED_BY_CLIENT BLOCKED_BY_ADMINISTRATOR CLEARTEXT_NOT_PERMITTED
    CACHED_IP_ADDRESS_SPACE_BLOCKED_BY_LOCAL_NETWORK_ACCESS_POLICY
"""

NET_ERRORS: dict[str, str] = {
    **{name: TRANSIENT for name in _NET_TRANSIENT.split()},
    **{name: PERMANENT for name in _NET_PERMANENT.split()},
    **{name: POLICY for name in _NET_POLICY.split()},
}

# Playwright / capture-server messages without a net::ERR_ code: (lower-case needle, class).
# First match wins; order matters ("url is not allowed" before the generic ones).
MESSAGES: tuple[tuple[str, str], ...] = (
    ("url is not allowed", POLICY),                       # the server's private-host refusal
    ("download", PERMANENT),                              # "Download is starting", a refused download
    ("robots", PERMANENT),                                # robots.txt disallows the URL
    ("navigation rules", PERMANENT),                      # a redirect/script navigation the crawl excludes
    ("has been closed", TRANSIENT),                       # "Target page, context or browser has been closed"
    ("target closed", TRANSIENT),
    ("crash", TRANSIENT),                                 # "Page crashed", "Target crashed"
    ("disconnected", TRANSIENT),                          # "Browser has been disconnected"
    ("browser is not usable", TRANSIENT),                 # stand-in: browser could not be (re)started
    ("timeout", TRANSIENT),                               # "Timeout 30000ms exceeded."
    ("interrupted by another navigation", TRANSIENT),
    ("frame was detached", TRANSIENT),
    ("navigation produced no response", TRANSIENT),
    ("protocol error", TRANSIENT),                        # a CDP call failed mid-capture
)

_TYPES: dict[str, str] = {
    "policy": POLICY,
    "http": PERMANENT,           # a non-2xx main document whose status the report did not give
    "timeout": TRANSIENT,
    "connection": TRANSIENT,
    "cancelled": TRANSIENT,
    "signing": PERMANENT,        # the operator fixes the signer; recapturing changes nothing
    "artifact_sink": PERMANENT,  # contracts.md A.8: fix the store, do not recapture
}
_NET_CODE = re.compile(r"net::ERR_([A-Z0-9_]+)")


def status_class(status: int) -> str:
    """Class of an HTTP status: 408, 429 and 5xx transient; any other status permanent."""
    return TRANSIENT if status in (408, 429) or 500 <= status <= 599 else PERMANENT


def refusal_class(status: int) -> str:
    """Class of a non-200 ``POST /captures`` answer: 5xx transient (nothing started; 500
    ``InternalFailure``); 400 ``ValidationException``, 404/406/415 permanent."""
    return TRANSIENT if 500 <= status <= 599 else PERMANENT


def classify_message(message: str) -> tuple[str, str | None] | None:
    """``(class, note)`` from a ``net::ERR_*`` code or a known Playwright message, or None.

    ``note`` is set (for the caller's log) when the text names a ``net::ERR_*`` code this
    table does not know: it is classed ``transient``.
    """
    code = _NET_CODE.search(message)
    if code:
        known = NET_ERRORS.get(code.group(1))
        if known:
            return known, None
        return TRANSIENT, f"unknown Chromium error net::ERR_{code.group(1)}: classed transient"
    lowered = message.lower()
    for needle, cls in MESSAGES:
        if needle in lowered:
            return cls, None
    return None


def classify_report(report: dict, http_status: int | None) -> tuple[str, str | None]:
    """``(class, note)`` of a failed capture report (contracts.md A.8 ``report``).

    Order: ``errorDetails.type`` policy; the main document's HTTP status (``http_status``);
    the message (:func:`classify_message`); the other types (:data:`_TYPES`); else transient
    with a note naming the unknown type.
    """
    details = report.get("errorDetails") if isinstance(report.get("errorDetails"), dict) else {}
    kind = details.get("type")
    message = details.get("message") if isinstance(details.get("message"), str) else ""
    if kind == "policy":
        return POLICY, None
    if http_status is not None:
        return status_class(http_status), None
    found = classify_message(message)
    if found:
        return found
    if kind in _TYPES:
        return _TYPES[kind], None
    if report.get("status") == "timeout":
        return TRANSIENT, None
    if kind in (None, "internal"):
        return TRANSIENT, None
    return TRANSIENT, f"unknown errorDetails.type {str(kind)[:40]!r}: classed transient"
