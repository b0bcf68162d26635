"""Courses: assignments with deadlines and rules, gradebooks, regrades (issue 12, items 5 and 6)."""
