"""Courses: assignments' rules (`rules`), gradebooks (`gradebook`), what instructors do (`admin`)
and the course pages. The tables and `CourseStore`, `RegradeStore` are in `server.store`."""
