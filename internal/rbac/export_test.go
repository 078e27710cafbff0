package rbac

// Subjects exposes the typed Casbin subjects to the tests.
var (
	UserSubject = userSubject
	RoleSubject = roleSubject
)
