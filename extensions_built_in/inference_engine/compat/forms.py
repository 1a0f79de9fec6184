"""multipart/form-data bodies (OpenAI's image edit and video create forms, ComfyUI's uploads), parsed by the
standard library's MIME parser (no python-multipart). The route reads the body within its own bound."""
from email import policy
from email.parser import BytesParser


def parse_form(ctype: str, body: bytes, err, field: str = "body", is_file=None) -> tuple[dict, list]:
    """({text field: its first value}, [(file field, file name or None, bytes), ...] in order).

    A part is a file where `is_file(name)` says so, else where it has a file name. `err(field, message)`
    makes the refusal (the client's error shape), naming `field` for the form as a whole and the part's
    own name for text that is not UTF-8."""
    try:
        head = b"Content-Type: " + ctype.encode("latin-1") + b"\r\n\r\n"
    except UnicodeEncodeError:
        raise err(field, "the content-type header is not Latin-1") from None
    msg = BytesParser(policy=policy.HTTP).parsebytes(head + body)
    if not msg.is_multipart() or not msg.get_param("boundary"):
        raise err(field, "the body is not a multipart/form-data form with a boundary")
    fields, files = {}, []
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or not name:
            continue
        payload = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if is_file(name) if is_file is not None else filename is not None:
            files.append((name, filename, payload))
        elif name not in fields:
            try:
                fields[name] = payload.decode("utf-8")
            except UnicodeDecodeError:
                raise err(name, "is not UTF-8 text") from None
    return fields, files
