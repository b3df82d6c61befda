"""Scans of loaded modules that every check repeats, remembered while nothing changed.

The tamper guard (tamper.py) reads every attribute of every course_utils module at each call of
a student's function: dozens of times a test cell, about 2 ms each where many modules are loaded
(the tests load every catalogue). What a scan found in a module is remembered here with the exact
keys and values it read; while the module holds those same objects, the same scan would find the
same thing, so it is not repeated. Comparisons are by identity, in C: no code of the student's
runs while they are made. Any reassignment, addition or deletion changes what a module holds, and
the next check scans it again.
"""
import operator
import sys

_listed = [(), {}]  # [sys.modules' keys when last read, {prefix: the names under it}]


def loaded(prefix):
    """The names in sys.modules that are `prefix` or start with `prefix.`, in its order."""
    names = tuple(sys.modules)
    listed, found = _listed
    if len(names) != len(listed) or not all(map(operator.is_, names, listed)):
        _listed[:] = [names, {}]
        found = _listed[1]
    if prefix not in found:
        found[prefix] = [n for n in names if type(n) is str and (n == prefix or n.startswith(prefix + "."))]
    return found[prefix]


class Remembered:
    """What one kind of scan found per module, valid while the module holds what was scanned."""

    def __init__(self):
        self._found = {}  # module name -> (module, keys, values, what the scan found)

    def lookup(self, name, module):
        """(True, found) if `module` holds exactly what it held when scanned, else (False, None)."""
        kept = self._found.get(name)
        if kept is None or kept[0] is not module:
            return False, None
        namespace = vars(module)
        if (len(namespace) == len(kept[1]) and all(map(operator.is_, namespace, kept[1]))
                and all(map(operator.is_, namespace.values(), kept[2]))):
            return True, kept[3]
        return False, None

    @staticmethod
    def snapshot(module):
        """(keys, values) of the module now: scan these, then `keep` them with the result. A value
        read during the scan (its __module__, say) may run code that changes the module; what was
        scanned is then what is remembered, and the change is seen next time."""
        namespace = vars(module)
        return tuple(namespace), tuple(namespace.values())

    def keep(self, name, module, keys, values, found):
        self._found[name] = (module, keys, values, found)

    def forget(self, name):
        self._found.pop(name, None)
