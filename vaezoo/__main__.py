from vaezoo.cli import console

console()
