"""One date format for the whole site, the admin included, with the time zone: the pages write
"Nov 24, 2026 20:22 UTC"; Django's English default would be "Nov. 24, 2026, 8:22 p.m."
(FORMAT_MODULE_PATH in settings points here)."""

DATE_FORMAT = "M j, Y"
TIME_FORMAT = "H:i"
DATETIME_FORMAT = "M j, Y H:i T"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i T"
MONTH_DAY_FORMAT = "M j"
YEAR_MONTH_FORMAT = "M Y"
