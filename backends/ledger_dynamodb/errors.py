"""botocore/aiobotocore exceptions -> ``LedgerError``: rejected, not sent, or unknown.

AWS's own message text is repeated only for codes whose text is known to hold no
credential or signature (an ``InvalidSignatureException`` quotes the canonical request).
"""

from __future__ import annotations

from typing import Any, NoReturn

from ledger_core.errors import LedgerError, LedgerUnavailable

CONDITIONAL = "ConditionalCheckFailedException"
NOT_FOUND = "ResourceNotFoundException"
THROTTLED = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "LimitExceededException",
        "Throttling",
        "TooManyRequestsException",
    }
)
CREDENTIALS = frozenset(
    {
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "ExpiredToken",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "RequestExpired",
    }
)
# Codes whose AWS message is safe and useful to repeat.
_SAFE_MESSAGE = frozenset({NOT_FOUND, "ValidationException", "ResourceInUseException"})
_MAX_MESSAGE = 300


def _botocore() -> Any:
    import botocore.exceptions

    return botocore.exceptions


def _part(exc: BaseException, name: str) -> dict[str, Any] | None:
    """A map in a ``ClientError``'s response (``None`` when absent or malformed)."""
    response = getattr(exc, "response", None)
    part = response.get(name) if isinstance(response, dict) else None
    return part if isinstance(part, dict) else None


def code_of(exc: BaseException) -> str | None:
    """The AWS error code of a ``ClientError`` (``None`` for anything else)."""
    code = (_part(exc, "Error") or {}).get("Code")
    return code if isinstance(code, str) else None


def _meta(exc: BaseException) -> dict[str, Any]:
    meta = _part(exc, "ResponseMetadata")
    return {} if meta is None else meta  # the response's own: mark_attempts writes to it


def retried(exc: BaseException) -> bool:
    """Whether botocore sent the request more than once (unknown counts as yes)."""
    attempts = _meta(exc).get("RetryAttempts")
    return not isinstance(attempts, int) or attempts > 0


def _status(exc: BaseException) -> int:
    status = _meta(exc).get("HTTPStatusCode")
    return status if isinstance(status, int) else 0


def returned_item(exc: BaseException) -> dict[str, Any] | None:
    """The stored item a ``ConditionalCheckFailedException`` returned (``ALL_OLD``:
    DynamoDB sends it; dynalite and some emulators do not)."""
    return _part(exc, "Item")


def is_conditional(exc: BaseException) -> bool:
    return code_of(exc) == CONDITIONAL


def is_not_found(exc: BaseException) -> bool:
    return code_of(exc) == NOT_FOUND


def rejected(exc: BaseException) -> bool:
    """Whether a failed write cannot have landed; else its fate is unknown (resolve it by
    the token, C5). A 4xx answer to the only attempt is a refusal; a 5xx ("may or may not
    have succeeded"), a lost connection, a timeout, or any error after a retry is unknown."""
    if isinstance(exc, LedgerError):
        return True  # our own shell refused (closed): nothing was sent
    bc = _botocore()
    if isinstance(exc, bc.ClientError):
        return 400 <= _status(exc) < 500 and not retried(exc)
    return isinstance(  # these fail before anything is sent
        exc,
        (
            bc.NoCredentialsError,
            bc.PartialCredentialsError,
            bc.CredentialRetrievalError,
            bc.NoRegionError,
            bc.ParamValidationError,
            bc.ProfileNotFound,
        ),
    )


def lost(exc: BaseException) -> bool:
    """Whether a failure without an AWS answer may succeed if sent again: a lost or
    timed-out connection (an answer's own test is the ledger's ``_call``)."""
    if isinstance(exc, LedgerError):
        return False
    bc = _botocore()
    return isinstance(exc, (bc.HTTPClientError, bc.ConnectionError, TimeoutError))


def mark_attempts(exc: BaseException, attempts: int) -> BaseException:
    """Record on a ``ClientError`` how many times its request was sent, as botocore's
    retries did (:func:`retried` reads it): an earlier attempt may have landed."""
    meta = _meta(exc)
    meta["RetryAttempts"] = max(attempts - 1, meta.get("RetryAttempts") or 0)
    return exc


def describe_failure(exc: BaseException) -> str:
    """A short, secret-free account of a driver exception."""
    if isinstance(exc, LedgerError):
        return str(exc)
    code = code_of(exc)
    bc = _botocore()
    if code is not None:
        if code == NOT_FOUND:
            return f"{code}: the table does not exist (deleted, or another account or region?)"
        if code in THROTTLED:
            return f"{code}: throttled by DynamoDB after botocore's retries"
        if code in CREDENTIALS:
            return f"{code}: access denied or credentials invalid/expired (check the AWS chain)"
        status = _status(exc)
        text = f"{code} (HTTP {status})" if status else code
        if code in _SAFE_MESSAGE:
            message = str((_part(exc, "Error") or {}).get("Message", ""))
            if message:
                text += f": {message[:_MAX_MESSAGE]}"
        return text
    if isinstance(exc, (bc.NoCredentialsError, bc.PartialCredentialsError)):
        return f"{type(exc).__name__}: no usable AWS credentials in the standard chain"
    if isinstance(exc, (bc.CredentialRetrievalError, bc.TokenRetrievalError)):
        return f"{type(exc).__name__}: AWS credentials could not be obtained or refreshed"
    if isinstance(exc, bc.NoRegionError):
        return "NoRegionError: no AWS region (give ?region= or set AWS_DEFAULT_REGION)"
    if isinstance(exc, bc.ProfileNotFound):
        return "ProfileNotFound: the AWS profile does not exist"
    if isinstance(exc, bc.EndpointConnectionError):
        return "EndpointConnectionError: could not connect to the endpoint"
    if isinstance(exc, (bc.ConnectTimeoutError, bc.ReadTimeoutError)):
        return f"{type(exc).__name__}: no answer in time"
    if isinstance(exc, bc.ConnectionClosedError):
        return "ConnectionClosedError: the connection closed before the answer (or its time)"
    if isinstance(exc, TimeoutError):
        return "TimeoutError: no answer within the attempt's share of the call's timeout"
    return type(exc).__name__


def unavailable(exc: BaseException, what: str, location: str) -> LedgerError:
    """The ``LedgerError`` for a failed ``what``; the caller chains ``exc``."""
    if isinstance(exc, LedgerError):
        return exc
    return LedgerUnavailable(f"DynamoDB {what} failed on {location}: {describe_failure(exc)}")


def fail(exc: BaseException, what: str, location: str) -> NoReturn:
    """Raise ``exc`` as a ``LedgerError`` (chained), or as is when it already is one."""
    if isinstance(exc, LedgerError):
        raise exc
    raise unavailable(exc, what, location) from exc
