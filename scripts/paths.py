"""Output paths the scripts check before they run: a run of minutes (training, a ring over
GPUs) should not end on a folder it cannot write."""
import os
import tempfile


def unwritable(path, folder=False):
    """Why `path` (a file, or with folder=True a folder) cannot be written, or None. Makes
    the missing folders now, which the run would make at its end (a run refused later for
    another reason leaves them, empty), and creates and removes a file in the folder:
    permission bits alone do not tell (root; /proc)."""
    where = os.path.abspath(path) if folder else os.path.dirname(os.path.abspath(path))
    above = where
    while not os.path.exists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        return f"{above} is a file, not a folder"
    if not folder and os.path.isdir(path):
        return "is a folder, not a file"
    try:
        os.makedirs(where, exist_ok=True)
    except OSError as e:
        return f"cannot create the folder {where} ({e.strerror})"
    try:
        tempfile.TemporaryFile(dir=where).close()
        if not folder and os.path.exists(path):
            open(path, "a").close()  # appends nothing: the file stays as it is
    except OSError as e:
        return f"cannot write there ({e.strerror})"
    return None
