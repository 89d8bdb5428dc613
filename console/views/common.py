"""Helpers shared by the console's views: service errors onto forms, and partial rendering for htmx."""

from django.core.exceptions import ValidationError


def apply_validation_error(form, error: ValidationError) -> None:
    """Put a service's ValidationError next to the fields it names (the rest at the top of the form)."""
    if hasattr(error, "error_dict"):
        for field, errors in error.error_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, error.messages)


def error_text(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return " ".join(error.messages)
    return str(error)
