"""Toy extensions the tests add the way a user would: one module and one registration line each."""
