"""The package version, in a module of its own so that modules inside the
package can read it without importing the package's public façade."""
__version__ = "0.1.0"
