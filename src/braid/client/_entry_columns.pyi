"""Types of the compiled batch decoder (``_entry_columns.c``); see ``braid.client.columns``."""

def decode(
    payload: bytes | memoryview,
    count: int,
    index: int,
    pos: int,
    base_sequence: int,
    key_memo: dict[bytes, str],
    values: list[bytes],
    keys: list[str | None],
    event_times: list[int | None],
    sequence_ids: list[int],
    indexes: list[int],
    /,
) -> tuple[int, int]: ...
def pack(
    payload: bytes | memoryview, count: int, base_sequence: int, id_prefix: bytes, /
) -> (
    tuple[
        int, bytes, bytes, bytes, bytes, int, bytes, bytes, int, bytes, bytes, bytes, bytes, bytes
    ]
    | None
): ...
